module github.com/gatewaykit/dedupe/cmd/dedupe

go 1.26.0

require (
	github.com/gatewaykit/dedupe v0.1.0
	github.com/gatewaykit/dedupe/deduperedis v0.1.0
	github.com/gatewaykit/dedupe/postgres v0.1.0
)
