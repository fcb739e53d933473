package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/render"
)

func init() {
	register("plan", "size GPUs, vLLM flags and cost from the KV-cache arithmetic", runPlan)
}

// Output formats of plan.
const (
	formatTable  = "table"
	formatJSON   = "json"
	formatUpload = "upload"
)

// Errors of the plan command line.
var (
	// errUnknownFormat is returned for a --format other than table or json.
	errUnknownFormat = errors.New("unknown format")
	// errUnexpectedArgs is returned for arguments after the flags.
	errUnexpectedArgs = errors.New("unexpected arguments")
	// errConflictingInputs is returned for --config and -f together.
	errConflictingInputs = errors.New("--config and -f are exclusive")
	// errUploadNeedsPlatform is returned for --format upload without -f:
	// the revisions are the platform's.
	errUploadNeedsPlatform = errors.New("--format upload needs -f: the revisions are the platform description's")
)

// runPlan plans the reference workload's scenario, the one in --config, or a platform
// description's models as `llmplat render` deploys them (-f, with each
// model's spot declaration), and writes it as a table, as JSON, or (-f
// only) as the commands that upload each model's weights.
func runPlan(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("plan")
	fs.SetOutput(stdout)
	config := fs.String("config", "", "YAML or JSON file with models, GPUs, workloads and fleet (default: the reference workload)")
	platform := fs.String("f", "", "platform description (YAML, as llmplat render takes it): plan its models as deployed")
	format := fs.String("format", formatTable, "output format: table, json, or upload (-f only: the weights' upload commands)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w %q", errUnexpectedArgs, fs.Args())
	}
	if !slices.Contains([]string{formatTable, formatJSON, formatUpload}, *format) {
		return fmt.Errorf("%w %q: want %s, %s or %s", errUnknownFormat, *format, formatTable, formatJSON, formatUpload)
	}
	switch {
	case *config != "" && *platform != "":
		return errConflictingInputs
	case *format == formatUpload && *platform == "":
		return errUploadNeedsPlatform
	}
	var res capacity.Result
	var p render.Platform
	var err error
	if *platform != "" {
		p, res, err = planPlatform(*platform)
	} else {
		res, err = planConfig(*config)
	}
	if err != nil {
		return err
	}
	switch *format {
	case formatJSON:
		return capacity.WriteJSON(stdout, res)
	case formatUpload:
		return writeUpload(stdout, p, res)
	}
	return capacity.WriteTable(stdout, res)
}

// planConfig plans a plan file, or the reference workload's scenario without one.
func planConfig(path string) (capacity.Result, error) {
	in := capacity.ReferenceInput()
	if path != "" {
		var err error
		if in, err = capacity.LoadConfig(path); err != nil {
			return capacity.Result{}, err
		}
	}
	return capacity.Plan(in)
}

// planPlatform plans a platform description as render deploys it.
func planPlatform(path string) (render.Platform, capacity.Result, error) {
	p, err := render.ParseFile(path)
	if err != nil {
		return render.Platform{}, capacity.Result{}, err
	}
	res, err := render.Plan(p)
	return p, res, err
}

// writeUpload writes, per deployed model, the commands that fetch the
// checkpoint its planner profile was sized for and upload it where the
// model's modelsync reads it: s3://$BUCKET/<model>/<revision>/. The
// weights, the served name and the sizing are one declaration (the
// profile), so what is uploaded is what was planned.
func writeUpload(w io.Writer, p render.Platform, res capacity.Result) error {
	ew := &uploadWriter{w: w}
	ew.printf("# The weights each model's capacity profile was sized for. Set BUCKET first\n")
	ew.printf("# (terraform output -raw model_bucket).\n")
	for _, m := range p.Models {
		k := slices.IndexFunc(res.Models, func(mp capacity.ModelPlan) bool { return mp.Model == m.Name })
		mp := res.Models[k]
		if mp.Weights == "" {
			return fmt.Errorf("%w: model %s: its profile names no weights (add weights and quantization under plan.models)",
				render.ErrInvalid, m.Name)
		}
		dir := "weights/" + m.Name + "/" + m.Revision
		ew.printf("\n# %s: %s (%s, %.1f GiB), served as %s\n", m.Name, mp.Weights, mp.Quantization,
			mp.Memory.WeightBytes/capacity.GiB, mp.ServedName)
		ew.printf("hf download %s --local-dir %s\n", mp.Weights, dir)
		ew.printf("aws s3 sync %s s3://$BUCKET/%s/%s/\n", dir, m.Name, m.Revision)
	}
	return ew.err
}

// uploadWriter keeps the first write error.
type uploadWriter struct {
	w   io.Writer
	err error
}

func (u *uploadWriter) printf(format string, args ...any) {
	if u.err == nil {
		_, u.err = fmt.Fprintf(u.w, format, args...)
	}
}
