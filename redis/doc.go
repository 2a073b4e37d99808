// Package redis is a [dedupe.Store] on Redis, shared by every gateway instance.
package redis
