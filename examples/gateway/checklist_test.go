package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The deployment checklist of the ClawBridge gateway design, run on the
// gateway example's simulated platform against the real servers: faults
// between the gateways and their store, and Redis failing over to
// PostgreSQL. Each run must process every update exactly once.

// checkOnce checks that every update was processed once and that the faults
// were felt: the proxy lost chunks or cut connections.
func checkOnce(t *testing.T, rep report) {
	t.Helper()
	assert.True(t, rep.ExactlyOnce && rep.Processed == rep.Messages && rep.Twice == 0 && rep.Never == 0,
		"processed %d of %d, %d twice, %d never; want each exactly once", rep.Processed, rep.Messages, rep.Twice, rep.Never)
	assert.NotZero(t, rep.FaultStats.Lost+rep.FaultStats.Cut, "the proxy lost no chunk and cut no connection: %+v", rep.FaultStats)
	assert.NotZero(t, rep.StoreErrors, "no store call failed: the faults did not reach the gateway")
}

// faultConfig is a run with 30% of the chunks between gateway and store lost
// (each dropping its connection) and 500 ms added to each round trip.
func faultConfig(store string, messages int) config {
	c := defaultConfig()
	c.Store = store
	c.Messages = messages
	c.Fault = "loss=0.3,latency=500ms"
	return c
}

func TestFaultRedis(t *testing.T) {
	t.Parallel()
	addr, _ := serverEnv(t)
	checkOnce(t, runOK(t, faultConfig("redis://"+addr+"/0", 40)))
}

func TestFaultPostgres(t *testing.T) {
	t.Parallel()
	_, dsn := serverEnv(t)
	checkOnce(t, runOK(t, faultConfig(dsn, 16)))
}

func TestFaultLayered(t *testing.T) {
	t.Parallel()
	_, dsn := serverEnv(t)
	rep := runOK(t, faultConfig("layered:"+dsn, 16))
	checkOnce(t, rep)
	// Under these faults most marks are queued in the Deduper's backlog at
	// first, and copies of their messages are answered from it, before any
	// store: the front layer may answer none. TestRunLayered checks that it
	// answers copies when marks land.
	t.Logf("claims answered by layer: %v", rep.Layers)
}

// A layered store's front layer answers the copies of processed messages.
func TestRunLayered(t *testing.T) {
	_, dsn := serverEnv(t)
	rep := runOK(t, testConfig("layered:"+dsn))
	checkExactlyOnce(t, rep)
	assert.NotZero(t, rep.Layers["transport"], "the front layer answered no claim: %v", rep.Layers)
}

// TestFailoverRedisToPostgres runs a gateway whose store is Redis and whose
// fallback is PostgreSQL; Redis is unreachable for two seconds of the run.
// The fallback serves meanwhile, and after Redis is back every processed
// update is marked there: the marks of the outage were written to it.
func TestFailoverRedisToPostgres(t *testing.T) {
	addr, dsn := serverEnv(t)
	cfg := defaultConfig()
	cfg.Store = "redis://" + addr + "/0"
	cfg.Fallback = dsn
	cfg.Fault = "down=2s"
	cfg.Messages = 400
	rep := runOK(t, cfg)
	checkOnce(t, rep)
	// How many calls the outage fails, and so how many the fallback serves
	// and how many marks it queues, depends on when each call meets it (under
	// a parallel test load, one run saw 2 served and no mark queued): what
	// must hold is that some were served and every queued mark was written.
	assert.True(t, rep.Fallbacks != 0 && rep.Replayed == rep.Deferred && rep.Dropped == 0,
		"fallback served %d calls, %d marks queued for Redis, %d written, %d dropped; want some served, all written",
		rep.Fallbacks, rep.Deferred, rep.Replayed, rep.Dropped)
	assert.Equal(t, rep.Processed, rep.OnPrimary, "%d of %d processed updates marked on Redis after the outage", rep.OnPrimary, rep.Processed)
}
