"""The component package: the library's components for every Pulumi language (TypeScript, Go,
C#, Java, YAML) through `pulumi package add`. components.py wraps the native components, args.py
holds their argument types (generated from the config models by codegen.py), host.py serves them;
plugin/ at the repository root is the plugin Pulumi runs."""
