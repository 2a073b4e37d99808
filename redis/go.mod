module github.com/gatewaykit/dedupe/redis

go 1.26.0

require github.com/gatewaykit/dedupe v0.0.0-00010101000000-000000000000

replace github.com/gatewaykit/dedupe => ../
