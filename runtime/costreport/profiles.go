package costreport

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/llmplat/llmplat/runtime/capacity"
	"github.com/llmplat/llmplat/runtime/store"
)

// Errors of the price and profile look-ups.
var (
	// ErrUnknownPrice is returned when a GPU kind has no price: it is in
	// neither the capacity profiles nor the built-ins, and no price was given.
	ErrUnknownPrice = errors.New("no price for gpu")
	// ErrUnknownProfile is returned when a model has no capacity profile,
	// so its GPUs per replica are unknown.
	ErrUnknownProfile = errors.New("no capacity profile for model")
)

// Catalog maps the names a model goes by (the platform's name in the ledger
// and in node registrations, the served name in engine metrics) to the
// platform's name. Make one with NewCatalog or ReadCatalog.
type Catalog struct {
	served map[string]string // name → served name
	names  map[string]string // served name → name
}

// NewCatalog returns a catalog of the capacity built-in models.
func NewCatalog() Catalog {
	c := Catalog{served: map[string]string{}, names: map[string]string{}}
	for _, m := range capacity.BuiltinModels() {
		c.Add(m.Name, m.ServedName)
	}
	return c
}

// ReadCatalog returns the built-in models overlaid with the models table.
func ReadCatalog(ctx context.Context, db *store.DB) (Catalog, error) {
	c := NewCatalog()
	rows, err := db.QueryContext(ctx, "SELECT name, served_name FROM models ORDER BY name")
	if err != nil {
		return Catalog{}, fmt.Errorf("read models: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, served string
		if err := rows.Scan(&name, &served); err != nil {
			return Catalog{}, fmt.Errorf("read models: %w", err)
		}
		c.Add(name, served)
	}
	if err := rows.Err(); err != nil {
		return Catalog{}, fmt.Errorf("read models: %w", err)
	}
	return c, nil
}

// Add records that the model name is served as served.
func (c Catalog) Add(name, served string) {
	c.served[name] = served
	if served != "" {
		c.names[served] = name
	}
}

// Name returns the platform's name for a name or a served name; a name it
// does not know is returned as it is.
func (c Catalog) Name(s string) string {
	if _, ok := c.served[s]; ok {
		return s
	}
	if n, ok := c.names[s]; ok {
		return n
	}
	return s
}

// ServedName returns the served name of a model, or "" when unknown.
func (c Catalog) ServedName(name string) string { return c.served[name] }

// Profiles prices GPU-hours and sizes replicas from a capacity plan input
// (the reference workload, or a capacity config file), the built-in GPUs, and
// an optional price that overrides them all.
type Profiles struct {
	in       capacity.Input
	price    float64
	hasPrice bool
}

// NewProfiles returns the profiles of a capacity plan input.
func NewProfiles(in capacity.Input) Profiles { return Profiles{in: in.WithDefaults()} }

// WithPrice returns p with every GPU-hour priced at usd.
func (p Profiles) WithPrice(usd float64) Profiles {
	p.price, p.hasPrice = usd, true
	return p
}

// GPUPrice returns the USD price of one GPU-hour of a kind: the given
// price; else the input's cloud price for every kind; else the price of the
// input's or the built-in GPU of that name. Names match ignoring case and a
// leading "NVIDIA " (as drivers report them: "NVIDIA L40S").
func (p Profiles) GPUPrice(kind string) (float64, error) {
	if p.hasPrice {
		return p.price, nil
	}
	if p.in.Fleet.CloudPricePerGPUHour > 0 {
		return p.in.Fleet.CloudPricePerGPUHour, nil
	}
	want := gpuKey(kind)
	for _, w := range p.in.Workloads {
		if gpuKey(w.Deployment.GPU.Name) == want {
			return w.Deployment.GPU.PricePerHour, nil
		}
	}
	for _, g := range capacity.BuiltinGPUs() {
		if gpuKey(g.Name) == want {
			return g.PricePerHour, nil
		}
	}
	return 0, fmt.Errorf("%w %q: give a price per GPU-hour", ErrUnknownPrice, kind)
}

// Deployment returns the capacity profile of a model by its name or served
// name: its GPU kind and GPUs per replica.
func (p Profiles) Deployment(model string) (capacity.Deployment, error) {
	for _, w := range p.in.Workloads {
		if m := w.Deployment.Model; m.Name == model || m.ServedName == model {
			return w.Deployment, nil
		}
	}
	return capacity.Deployment{}, fmt.Errorf("%w %q", ErrUnknownProfile, model)
}

// gpuKey is a GPU name as compared: lower case, without a vendor prefix.
func gpuKey(name string) string {
	return strings.TrimPrefix(strings.ToLower(strings.TrimSpace(name)), "nvidia ")
}
