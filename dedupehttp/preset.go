package dedupehttp

import (
	"errors"
	"net/http"
	"reflect"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// FromPreset returns an [Extractor] that extracts keys with the platform
// preset p ([platform.Preset.Extract]). It keeps p, secret included: given
// it, [Middleware] and [NewAsync] authenticate with p as [WithVerify](p)
// does (a WithVerify among their options takes precedence). An Extractor
// that wraps it is a custom Extractor, which authenticates nothing.
func FromPreset(p platform.Preset) Extractor {
	return (&presetExtractor{p}).extract
}

// presetExtractor is the Extractor of a preset.
type presetExtractor struct{ p platform.Preset }

func (e *presetExtractor) extract(r *http.Request) (dedupe.Key, error) {
	if r == probe {
		return dedupe.Key{}, &presetFound{e.p}
	}
	b, err := Body(r)
	if err != nil {
		return dedupe.Key{}, err
	}
	return e.p.Extract(b, r.Header)
}

// probe is the request with which presetOf asks an Extractor made by
// FromPreset for its preset. No server makes it.
var probe = new(http.Request)

// presetFound is how an Extractor made by FromPreset answers the probe.
type presetFound struct{ p platform.Preset }

func (*presetFound) Error() string { return "dedupe: dedupehttp: preset of an extractor" }

// presetCode is the code pointer shared by every Extractor FromPreset
// makes: they are method values of presetExtractor.extract.
var presetCode = reflect.ValueOf((&presetExtractor{}).extract).Pointer()

// presetOf returns the preset an Extractor made by FromPreset keeps. ok is
// false for any other Extractor, which it never calls.
func presetOf(extract Extractor) (p platform.Preset, ok bool) {
	if extract == nil || reflect.ValueOf(extract).Pointer() != presetCode {
		return platform.Preset{}, false
	}
	var found *presetFound
	if _, err := extract(probe); errors.As(err, &found) {
		return found.p, true
	}
	return platform.Preset{}, false
}

// verifyPresetOf returns the option that authenticates with the preset
// extract keeps, if it was made by FromPreset; otherwise an option that
// does nothing. Placed before the caller's options, so that a WithVerify
// among them takes precedence.
func verifyPresetOf(extract Extractor) Option {
	if p, ok := presetOf(extract); ok {
		return WithVerify(p)
	}
	return func(*config) {}
}
