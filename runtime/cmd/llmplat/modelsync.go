package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/llmplat/llmplat/runtime/modelsync"
)

func init() {
	register("modelsync", "copy a model revision from S3 to the node's disk (the model pods' init container)", runModelSync)
}

// runModelSync copies s3://bucket/model/revision/ to dest/model/revision,
// or does nothing when that revision is already there.
func runModelSync(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("modelsync")
	bucket := fs.String("bucket", "", "S3 bucket of the model weights")
	region := fs.String("region", os.Getenv("AWS_REGION"), "the bucket's AWS region (env AWS_REGION)")
	model := fs.String("model", "", "model name: the first folder under the bucket")
	revision := fs.String("revision", "", "revision: the folder under the model")
	dest := fs.String("dest", "/models", "cache root: the revision lands in dest/model/revision")
	parallel := fs.Int("parallel", 8, "files copied at once")
	endpoint := fs.String("endpoint", "", "S3-compatible endpoint URL instead of AWS's (path-style addressing)")
	progress := fs.Duration("progress", 10*time.Second, "how often progress is logged")
	keepRevisions := fs.Int("keep-revisions", modelsync.DefaultKeepRevisions, "revisions of the model kept at least, this one included, the most recently used first")
	keepUnused := fs.Duration("keep-unused", modelsync.DefaultKeepUnused, "keep every revision of the model used (synced or started on) within this")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %v", errUnexpectedArgs, fs.Args())
	}
	if *region == "" {
		return errors.New("-region is required (or AWS_REGION)")
	}
	// Credentials come from the environment: EKS Pod Identity or IRSA in a
	// pod, a profile or variables elsewhere.
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(*region))
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if *endpoint != "" {
			o.BaseEndpoint, o.UsePathStyle = aws.String(*endpoint), true
		}
	})
	res, err := modelsync.Sync(ctx, modelsync.Config{S3: client, Bucket: *bucket, Model: *model, Revision: *revision,
		Dest: *dest, Parallel: *parallel, Progress: *progress, Logger: newLogger(os.Stderr),
		KeepRevisions: *keepRevisions, KeepUnused: *keepUnused})
	if err != nil {
		return err
	}
	if len(res.Removed) > 0 {
		fmt.Fprintf(stdout, "modelsync: removed old revisions of %s: %v\n", *model, res.Removed)
	}
	if res.Skipped {
		fmt.Fprintf(stdout, "modelsync: %s already synced (%d files, %d bytes); nothing copied\n", res.Dir, res.Files, res.Bytes)
		return nil
	}
	fmt.Fprintf(stdout, "modelsync: %s synced: %d files, %d bytes, %d read from S3\n", res.Dir, res.Files, res.Bytes, res.Fetched)
	return nil
}
