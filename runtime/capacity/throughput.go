package capacity

import "math"

// Throughput sources.
const (
	// SourceGiven marks a figure measured or assumed in the input.
	SourceGiven = "given"
	// SourceDerived marks a figure derived from the decoding-step model.
	SourceDerived = "derived"
)

// burstEpsilon absorbs floating-point noise before whole requests are
// counted, so 30 s × 4 requests/s is 120, not 119.
const burstEpsilon = 1e-9

// DerivedReplicaTokensPerSecond is the output of one replica when the
// planned streams decode together, from Deployment.TokensPerSecond at the
// mean context a stream holds while it decodes: the prompt
// (context − answer) plus half the answer.
func DerivedReplicaTokensPerSecond(w Workload) float64 {
	meanContext := w.ContextTokens - w.AnswerTokens/2
	planned := int64(w.PlannedStreamsPerReplica)
	return w.Deployment.TokensPerSecond(planned, meanContext) * float64(planned)
}

// CostPerMillionTokens is the USD cost of one million output tokens from a
// replica that costs costPerHour and makes tokensPerSecond at full load:
// the reference workload's 8B, 2.5 USD an hour at 1,500 tokens/s, 5.4 million tokens an
// hour, 2.5 ÷ 5.4 = 0.46 USD; its 70B, 10 ÷ 1.08 = 9.3 USD. At a
// utilisation below 1 the same hour sells fewer tokens: divide by it (the
// reference workload's 0.93 USD at 50 %).
func CostPerMillionTokens(costPerHour, tokensPerSecond, utilisation float64) float64 {
	if tokensPerSecond <= 0 || utilisation <= 0 {
		return math.Inf(1)
	}
	return costPerHour / (tokensPerSecond * 3600 / 1e6) / utilisation
}

// priceOf is the cloud price of one GPU-hour of g: the fleet's price for
// every kind when set, else the GPU profile's.
func priceOf(g GPU, f Fleet) float64 {
	if f.CloudPricePerGPUHour > 0 {
		return f.CloudPricePerGPUHour
	}
	return g.PricePerHour
}

// planThroughput is a replica's output rate and the cost of its tokens.
// A replica is priced as TP cloud GPUs even when it runs on owned ones:
// that is what its tokens would cost to buy, as docs/requirements.md prices them.
func planThroughput(w Workload, price float64) ThroughputPlan {
	derived := DerivedReplicaTokensPerSecond(w)
	rate, src := w.ReplicaTokensPerSecond, SourceGiven
	if rate == 0 {
		rate, src = derived, SourceDerived
	}
	replicaCost := price * float64(w.Deployment.TP)
	return ThroughputPlan{
		ReplicaTokensPerSecond:         rate,
		Source:                         src,
		DerivedReplicaTokensPerSecond:  derived,
		StreamTokensPerSecond:          rate / float64(w.PlannedStreamsPerReplica),
		ReplicaMillionTokensPerHour:    rate * 3600 / 1e6,
		PricePerGPUHourUSD:             price,
		ReplicaCostPerHourUSD:          replicaCost,
		CostPerMillionFullLoadUSD:      CostPerMillionTokens(replicaCost, rate, 1),
		Utilisation:                    w.Utilisation,
		CostPerMillionAtUtilisationUSD: CostPerMillionTokens(replicaCost, rate, w.Utilisation),
	}
}

// QueueBudgetFor is the reference workload's queue budget. A stream makes
// replicaTokensPerSecond ÷ planned tokens a second (the reference workload's 1,500 ÷ 32,
// "47"), so an answer takes answer ÷ that (400 ÷ 46.9 = 8.5 s); a replica
// running planned streams finishes planned ÷ seconds-per-answer requests a
// second, which is replicaTokensPerSecond ÷ answer (1,500 ÷ 400 = 3.75,
// "about 3.8"); a queue of limitSeconds holds the requests that start
// within the limit, rounded down to whole requests (30 × 3.75 = 112.5, so
// 112, "about 110"); at peak, replicas times that.
func QueueBudgetFor(replicaTokensPerSecond float64, planned int, answer int64, replicas int, limitSeconds float64) QueueBudget {
	perStream := replicaTokensPerSecond / float64(planned)
	rps := replicaTokensPerSecond / float64(answer)
	return QueueBudget{
		AnswerTokens:                answer,
		SecondsPerAnswer:            float64(answer) / perStream,
		RequestsPerSecondPerReplica: rps,
		QueueLimitSeconds:           limitSeconds,
		BurstRequestsPerReplica:     int64(math.Floor(limitSeconds*rps + burstEpsilon)),
		BurstRequestsAtPeak:         int64(math.Floor(limitSeconds*rps*float64(replicas) + burstEpsilon)),
	}
}
