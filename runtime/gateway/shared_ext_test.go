package gateway_test

import "github.com/llmplat/llmplat/runtime/gateway"

// chatBody and itoa are the white-box tests' (gateway.ChatBody, gateway.Itoa).
var (
	chatBody = gateway.ChatBody
	itoa     = gateway.Itoa
)

// errorCase is one refusal the gateway must give in the OpenAI shape.
type errorCase = gateway.ErrorCase

// checkError checks a refusal in the OpenAI shape (gateway.CheckError).
var checkError = gateway.CheckError

// promptEstimate is the gateway's estimate of a body's prompt, which the
// ledger reserves for (gateway.PromptEstimate).
var promptEstimate = gateway.PromptEstimate

// Request bodies nested as deep as a test asks (gateway.Nest, …).
var (
	nest        = gateway.Nest
	withTool    = gateway.WithTool
	withContent = gateway.WithContent
)

// waitLimit and waitClosed: the white-box tests' waits (gateway.WaitLimit,
// gateway.WaitClosed).
const waitLimit = gateway.WaitLimit

var waitClosed = gateway.WaitClosed
