// Package postgres is a [dedupe.Store] on PostgreSQL, shared by every gateway instance.
package postgres
