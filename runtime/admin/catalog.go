package admin

import (
	"context"

	"github.com/llmplat/llmplat/runtime/openai"
)

// OpenAIModels lists the declared models as GET /v1/models shows them; the
// gateway's catalog loads through it.
func (s *SQLStore) OpenAIModels(ctx context.Context) ([]openai.Model, error) {
	models, err := s.ListModels(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]openai.Model, 0, len(models))
	for _, m := range models {
		out = append(out, openai.Model{ID: m.Name, Object: "model", Created: m.CreatedAt.Unix(),
			OwnedBy: "llmplat", MaxModelLen: int64(m.MaxContextTokens)})
	}
	return out, nil
}

// ModelNames lists the declared models' names, for the orchestrators'
// pending gauge.
func (s *SQLStore) ModelNames(ctx context.Context) ([]string, error) {
	models, err := s.ListModels(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(models))
	for _, m := range models {
		names = append(names, m.Name)
	}
	return names, nil
}

// ServedNames maps each declared model to the name its engines answer to,
// for a gateway that sends requests to engines directly.
func (s *SQLStore) ServedNames(ctx context.Context) (map[string]string, error) {
	models, err := s.ListModels(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(models))
	for _, m := range models {
		out[m.Name] = m.ServedName
	}
	return out, nil
}
