// The Kubernetes provider's own main (cmd/pulumi-resource-kubernetes), with the schema and the
// Terraform mapping that its `go generate` writes beside it: the Makefile copies both from the
// provider module and sets the schema's version, as generate.go does.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
