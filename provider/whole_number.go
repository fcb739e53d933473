package provider

import (
	"context"
	"fmt"
	"math/big"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/attr/xattr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// wholeNumberType is the type of the provider's integer attributes. It is
// types.Int64 (values are types.Int64), except that a number Terraform
// holds but an int64 cannot (1.5, 2^63) is refused at the attribute with
// our message, instead of the framework's conversion error ("always an
// error in the provider"), which names no attribute.
type wholeNumberType struct {
	basetypes.Int64Type
}

// wholeNumber is the CustomType of the integer attributes a configuration
// sets.
var wholeNumber = wholeNumberType{}

var (
	_ basetypes.Int64Typable = wholeNumberType{}
	//nolint:staticcheck // the value stays types.Int64, so the check lives on the type.
	_ xattr.TypeWithValidate = wholeNumberType{}
)

// Equal is true of this type and of types.Int64Type: the values are
// types.Int64, whose Type is types.Int64Type, and an object holding them
// (a resource's state) checks each against its attribute's type this way.
func (t wholeNumberType) Equal(o attr.Type) bool {
	switch o.(type) {
	case wholeNumberType, basetypes.Int64Type:
		return true
	}
	return false
}

func (t wholeNumberType) String() string { return "provider.wholeNumberType" }

// ValueFromTerraform reads an int64; a number that is not one reads as
// unknown, which Validate, run on the same value first, has refused.
func (t wholeNumberType) ValueFromTerraform(ctx context.Context, in tftypes.Value) (attr.Value, error) {
	if _, ok := wholeInt64(in); !ok {
		return types.Int64Unknown(), nil
	}
	return t.Int64Type.ValueFromTerraform(ctx, in)
}

// Validate refuses a number that is not a whole number or does not fit
// in 64 bits, at the attribute.
func (t wholeNumberType) Validate(_ context.Context, in tftypes.Value, p path.Path) diag.Diagnostics {
	var diags diag.Diagnostics
	if f, ok := wholeInt64(in); !ok {
		name := p.String()
		switch {
		case !f.IsInt():
			diags.AddAttributeError(p, "Not a whole number", fmt.Sprintf("%s must be a whole number; got %s.", name, f.Text('g', -1)))
		default:
			diags.AddAttributeError(p, "Number out of range", fmt.Sprintf("%s must be between %d and %d; got %s.",
				name, int64(-1<<63), int64(1<<63-1), f.Text('f', 0)))
		}
	}
	return diags
}

// wholeInt64 reports whether in is null, unknown, or a known number an
// int64 holds; otherwise it returns the number.
func wholeInt64(in tftypes.Value) (*big.Float, bool) {
	if !in.IsKnown() || in.IsNull() || !in.Type().Is(tftypes.Number) {
		return nil, true
	}
	var f *big.Float
	if err := in.As(&f); err != nil || f == nil {
		return nil, true // the framework reports what it cannot read
	}
	if !f.IsInt() {
		return f, false
	}
	if _, acc := f.Int64(); acc != big.Exact {
		return f, false
	}
	return f, true
}
