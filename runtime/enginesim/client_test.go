package enginesim

import (
	"context"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// TestOfficialClient streams from the simulator with the official Go SDK
// (engine on a clock 200 times faster than real time): the SDK parses every
// chunk, the accumulated text is what usage counts, and usage equals what
// the simulator's metrics counted.
func TestOfficialClient(t *testing.T) {
	cfg := testConfig()
	cfg.Clock = NewScaledClock(200)
	s := newTestSim(t, cfg)
	runEngine(t, s)
	srv := serve(t, s)
	client := oai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	const question = "How many streams fit on one L40S at a 2k context?"
	ctx := context.Background()

	stream := client.Chat.Completions.NewStreaming(ctx, oai.ChatCompletionNewParams{
		Model:         s.ServedModelName(),
		Messages:      []oai.ChatCompletionMessageParamUnion{oai.UserMessage(question)},
		MaxTokens:     oai.Int(60),
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)},
	})
	var acc oai.ChatCompletionAccumulator
	var usage oai.CompletionUsage
	chunks := 0
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		chunks++
		if len(chunk.Choices) == 0 {
			usage = chunk.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if err := stream.Close(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 {
		t.Fatalf("got %d chunks, want a role chunk, content and usage", chunks)
	}
	content := acc.Choices[0].Message.Content
	wantPrompt := tokens.ChatPromptTokens([]openai.Message{openai.TextMessage("user", question)})
	checks := []struct {
		name      string
		got, want int64
	}{
		{"usage prompt_tokens vs tokenizer", usage.PromptTokens, wantPrompt},
		{"usage completion_tokens vs tokens in content", usage.CompletionTokens, tokens.Count(content)},
		{"usage total_tokens", usage.TotalTokens, usage.PromptTokens + usage.CompletionTokens},
		{"metrics prompt tokens", int64(scrape(t, srv.URL, "vllm:prompt_tokens_total{")), usage.PromptTokens},
		{"metrics generation tokens", int64(scrape(t, srv.URL, "vllm:generation_tokens_total{")), usage.CompletionTokens},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
	if usage.CompletionTokens < 1 || usage.CompletionTokens > 60 {
		t.Errorf("completion_tokens = %d, want 1..60", usage.CompletionTokens)
	}
	if fr := acc.Choices[0].FinishReason; fr != "stop" && fr != "length" {
		t.Errorf("finish_reason = %q", fr)
	}

	// The same request, not streamed, gets the same answer: the text is
	// seeded by the prompt.
	resp, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{
		Model:     s.ServedModelName(),
		Messages:  []oai.ChatCompletionMessageParamUnion{oai.UserMessage(question)},
		MaxTokens: oai.Int(60),
	})
	if err != nil {
		t.Fatalf("non-streamed: %v", err)
	}
	if got := resp.Choices[0].Message.Content; got != content {
		t.Errorf("non-streamed content %q, want the streamed %q", got, content)
	}
	if resp.Usage.CompletionTokens != usage.CompletionTokens || resp.Usage.PromptTokens != usage.PromptTokens {
		t.Errorf("non-streamed usage %+v, want %+v", resp.Usage, usage)
	}
}
