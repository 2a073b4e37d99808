package postgres

// ServerDSN is testDSN for the external tests of the package: the test
// server's DSN, or a skip (a failure when DEDUPE_REQUIRE_SERVERS=1).
var ServerDSN = testDSN
