// Command modules prints the schema modules k8sschema reads, one
// module@version per line, for `make schemas` to download.
package main

import (
	"fmt"

	"github.com/llmplat/llmplat/runtime/k8sschema"
)

func main() {
	for _, m := range k8sschema.Modules {
		fmt.Println(m)
	}
}
