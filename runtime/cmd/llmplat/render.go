package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/llmplat/llmplat/runtime/render"
)

func init() {
	register("render", "write the Kubernetes manifests of a platform description (-f), for GitOps", runRender)
}

// runRender renders the description in -f to the folder -o, one file per
// part, or to stdout as one YAML stream.
func runRender(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("render")
	fs.SetOutput(stdout)
	file := fs.String("f", "", "platform description (YAML): models, plan, pools, images, namespace; see examples/platform.yaml")
	out := fs.String("o", "", "folder to write the manifests to (created if missing); empty writes them to stdout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %v", errUnexpectedArgs, fs.Args())
	}
	if *file == "" {
		return errors.New("-f is required: the platform description to render")
	}
	p, err := render.ParseFile(*file)
	if err != nil {
		return err
	}
	files, err := render.Render(p)
	if err != nil {
		return err
	}
	if *out == "" {
		for i, f := range files {
			if i > 0 {
				fmt.Fprintln(stdout, "---")
			}
			fmt.Fprintf(stdout, "# %s\n", f.Name)
			if _, err := stdout.Write(f.Data); err != nil {
				return err
			}
		}
		return nil
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(*out, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "llmplat render: %d files in %s\n", len(files), *out)
	return nil
}
