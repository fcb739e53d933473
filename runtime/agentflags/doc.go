// Package agentflags holds the node agent's command-line rules: the
// orchestrator socket URL, the node id and the -model values. The agent
// (runtime/nodeagent, `llmplat nodeagent`) parses its command line with
// them, and the Terraform provider checks the command it emits for an
// llmplat_onprem_node with the same Parse at plan, so the provider never
// hands out a command the agent refuses.
//
// It imports only the standard library and runtime/nodeproto: the provider
// links it without the agent.
package agentflags
