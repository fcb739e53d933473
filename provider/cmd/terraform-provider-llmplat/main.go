// Command terraform-provider-llmplat is the llmplat Terraform provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/llmplat/llmplat/provider"
)

// version is set at release time with -ldflags.
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers such as delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/llmplat/llmplat",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
