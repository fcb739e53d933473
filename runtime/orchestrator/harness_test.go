package orchestrator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmplat/llmplat/runtime/admin"
	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/enginesim"
	"github.com/llmplat/llmplat/runtime/nodeagent"
	"github.com/llmplat/llmplat/runtime/openai"
	"github.com/llmplat/llmplat/runtime/orchestrator"
	"github.com/llmplat/llmplat/runtime/platformtest"
	"github.com/llmplat/llmplat/runtime/registry"
	"github.com/llmplat/llmplat/runtime/store"
	"github.com/llmplat/llmplat/runtime/testenv"
	"github.com/llmplat/llmplat/runtime/tokens"
)

// testModel is the platform model every test node serves.
const testModel = "llama-8b"

// shutdownGrace is the test replicas' shutdown grace: long enough for a
// halted replica's short test streams to end, short enough that a test's
// end does not wait on a stream it leaves open.
const shutdownGrace = 5 * time.Second

// cluster is a control plane under test (platformtest.Cluster): PostgreSQL,
// Redis, replicas of the orchestrator as separate instances, and nodes (a
// simulator and a real node agent each). Its fields name the cluster's
// parts as this package's tests do.
type cluster struct {
	pc     *platformtest.Cluster
	t      testing.TB
	db     *store.DB
	rdb    *redis.Client
	reg    *registry.Registry
	tokens *admin.SQLNodeTokens
	events *orchestrator.Events
	prefix string
	dsn    string // the database's
	// adminToken opens the admin API of the gateway gatewayFor starts.
	adminToken string
	// replicas are the replicas started, for waits on their snapshots.
	replicas []*replica
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	pc := platformtest.NewCluster(t)
	pc.Orchestrator.ShutdownGrace = shutdownGrace
	return &cluster{pc: pc, t: t, db: pc.DB, rdb: pc.RedisClient, reg: pc.Registry, tokens: pc.Tokens,
		events: pc.Events, prefix: pc.Redis.Prefix, dsn: pc.DSN}
}

// dsnVia is the cluster's database reached at addr (a fault proxy).
func (c *cluster) dsnVia(addr string) string {
	c.t.Helper()
	u, err := url.Parse(c.dsn)
	if err != nil {
		c.t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// replica is one orchestrator replica (platformtest.Replica), restartable
// in place as a pod is.
type replica struct {
	*platformtest.Replica
	id string
}

// startReplica starts replica id; mod, if set, adjusts its config.
func (c *cluster) startReplica(id string, mod func(*orchestrator.Config)) *replica {
	c.t.Helper()
	r := &replica{Replica: c.pc.StartReplica(id, mod), id: id}
	c.replicas = append(c.replicas, r)
	return r
}

// start runs a new instance under the replica's URL.
func (r *replica) start() { r.Start() }

// halt stops the running instance, as a pod that is terminated.
func (r *replica) halt() { r.Halt() }

// o returns the running instance.
func (r *replica) o() *orchestrator.Orchestrator { return r.Orchestrator() }

// wsURL is where nodes dial this replica.
func (r *replica) wsURL() string { return r.WSURL }

// node is one simulated engine with its node agent.
type node struct {
	id      string
	sim     *enginesim.Sim
	url     string
	tokenID int64
	stopSim func()
	// agentRun receives the agent's Run result when it ends; a test that
	// reads it puts it back.
	agentRun chan error
	agent    *nodeagent.Agent
}

// nodeOpts configures a test node.
type nodeOpts struct {
	sim       enginesim.Config
	serverURL string // default: the replica's URL
	agent     func(*nodeagent.Config)
}

// startNode starts a simulator and an agent connected to server.
func (c *cluster) startNode(id string, server *replica, opts nodeOpts) *node {
	c.t.Helper()
	issued, err := c.tokens.Issue(c.t.Context(), id, "issue-"+id, time.Now())
	if err != nil {
		c.t.Fatal(err)
	}
	sim, url, stopSim := c.startSim(id, opts.sim)
	serverURL := opts.serverURL
	if serverURL == "" {
		serverURL = server.wsURL()
	}
	acfg := platformtest.AgentConfig(serverURL, id, issued.Token, testModel, sim, url)
	if opts.agent != nil {
		opts.agent(&acfg)
	}
	a := platformtest.RunAgent(c.t, acfg)
	n := &node{id: id, sim: sim, url: url, tokenID: issued.ID, stopSim: stopSim, agent: a.Agent,
		agentRun: make(chan error, 1)}
	go func() { // ends with the agent, by the test's end
		<-a.Done()
		n.agentRun <- a.Err()
	}()
	return n
}

// Defaults of the test simulators: fast, many streams, reproducible.
const (
	simTimeScale  = 20
	simMaxNumSeqs = 64
	simSeed       = 7
)

// startSim serves a simulator for the test, defaulted for speed; the
// returned stop ends it and waits.
func (c *cluster) startSim(name string, simCfg enginesim.Config) (*enginesim.Sim, string, func()) {
	c.t.Helper()
	if simCfg.TimeScale == 0 {
		simCfg.TimeScale = simTimeScale
	}
	if simCfg.ServedModelName == "" {
		simCfg.ServedModelName = "sim-" + name
	}
	if simCfg.MaxNumSeqs == 0 {
		simCfg.MaxNumSeqs = simMaxNumSeqs
	}
	if simCfg.Seed == 0 {
		simCfg.Seed = simSeed
	}
	e := platformtest.StartEngine(c.t, simCfg)
	return e.Sim, e.URL, e.Stop
}

// waitNode waits until the registry shows the node, owned by owner, and
// every running replica's routing snapshot holds it at that epoch, so a
// dispatch right after finds it however slow the machine is; it returns
// the node's record.
func (c *cluster) waitNode(id, owner string) registry.Node {
	c.t.Helper()
	var got registry.Node
	testenv.Eventually(c.t, fmt.Sprintf("node %s registered at %s", id, owner), func() bool {
		n, err := c.reg.Get(c.t.Context(), id)
		got = n
		return err == nil && n.Owner == owner
	})
	c.waitSnapshots(fmt.Sprintf("node %s (epoch %d)", id, got.Epoch), id, func(n registry.Node, ok bool) bool {
		return ok && n.Epoch >= got.Epoch
	})
	return got
}

// waitSnapshots waits until cond holds for node id in the routing snapshot
// of every running replica.
func (c *cluster) waitSnapshots(what, id string, cond func(n registry.Node, ok bool) bool) {
	c.t.Helper()
	testenv.Eventually(c.t, what+" in every replica's snapshot", func() bool {
		for _, r := range c.replicas {
			if o := r.o(); o != nil && !cond(o.SnapshotNode(id)) {
				return false
			}
		}
		return true
	})
}

// job returns a chat job for the test model.
func job(id string, maxTokens int64) *dispatch.Job {
	content, _ := json.Marshal("Tell me about the sea.")
	return newJob(id, &openai.ChatCompletionRequest{
		Model: testModel, Messages: []openai.Message{{Role: "user", Content: content}}, MaxTokens: &maxTokens})
}

// jobFor is job for another model.
func jobFor(id, model string, maxTokens int64) *dispatch.Job {
	j := job(id, maxTokens)
	j.Model = model
	return j
}

// newJob is req's envelope as a gateway makes it: the prompt estimated
// once, the engine body encoded once.
func newJob(id string, req *openai.ChatCompletionRequest) *dispatch.Job {
	j, err := dispatch.NewJob(id, req, tokens.EstimateRequest(req))
	if err != nil {
		panic(err)
	}
	return j
}

// result is what a consumer read from a stream.
type result struct {
	events  int
	tokens  int64 // content chunks
	usage   *openai.Usage
	errEv   *openai.Error
	err     error // the final Recv error: io.EOF when complete
	latency time.Duration
}

// drain reads a stream to its end and closes it.
func drain(st dispatch.Stream) result {
	defer st.Close()
	var r result
	for {
		ev, err := st.Recv()
		if err != nil {
			r.err = err
			return r
		}
		r.events++
		r.tokens += ev.Tokens
		if ev.Usage != nil {
			u := *ev.Usage
			r.usage = &u
		}
		if ev.Err != nil {
			e := *ev.Err
			r.errEv = &e
		}
	}
}

// complete reports whether a stream ended with [DONE] and the usage.
func (r result) complete() bool { return errors.Is(r.err, io.EOF) && r.usage != nil }
