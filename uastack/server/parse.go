package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Parsers of the list settings of the simulation server in the form a
// command line gives them (gateway sim): comma-separated, spaces around an
// entry and empty entries ignored.

// splitList splits a comma-separated list.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// ParseRates parses generator periods ("1s,100ms,10ms"), SimConfig.Rates.
func ParseRates(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, x := range splitList(s) {
		d, err := time.ParseDuration(x)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// ParseTypes parses names of ScalarTypes ("Double,Int32", case-insensitive),
// SimConfig.Types; "all" gives nil, which is every one.
func ParseTypes(s string) ([]ua.TypeID, error) {
	if strings.EqualFold(strings.TrimSpace(s), "all") {
		return nil, nil
	}
	var out []ua.TypeID
next:
	for _, x := range splitList(s) {
		for _, t := range ScalarTypes {
			if strings.EqualFold(t.String(), x) {
				out = append(out, t)
				continue next
			}
		}
		return nil, fmt.Errorf("unknown type %q", x)
	}
	return out, nil
}

// ParseGenerators parses generator names (ParseGenerator), SimConfig.Generators.
func ParseGenerators(s string) ([]Generator, error) {
	var out []Generator
	for _, x := range splitList(s) {
		g, err := ParseGenerator(x)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// ParsePolicies parses the endpoints' security, Config.Policies: "default"
// (or "": DefaultPolicies), "all" (AllPolicies), or a list of Policy or
// Policy:Mode, the policy by URI or name (uasc.PolicyByName), the mode Sign
// or SignAndEncrypt; a secure policy without a mode is offered with both.
func ParsePolicies(s string) ([]uasc.EndpointSecurity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "default":
		return DefaultPolicies(), nil
	case "all":
		return AllPolicies(), nil
	}
	var out []uasc.EndpointSecurity
	for _, x := range splitList(s) {
		// A URI has colons of its own: the mode follows the last one.
		p, err := uasc.PolicyByName(x)
		mode, hasMode := "", false
		if i := strings.LastIndexByte(x, ':'); err != nil && i >= 0 {
			mode, hasMode = x[i+1:], true
			p, err = uasc.PolicyByName(x[:i])
		}
		if err != nil {
			return nil, err
		}
		sign := uasc.EndpointSecurity{PolicyURI: p.URI, Mode: ua.MessageSecurityModeSign}
		encrypt := uasc.EndpointSecurity{PolicyURI: p.URI, Mode: ua.MessageSecurityModeSignAndEncrypt}
		switch {
		case p.IsNone():
			out = append(out, uasc.EndpointSecurity{PolicyURI: p.URI, Mode: ua.MessageSecurityModeNone})
		case !hasMode:
			out = append(out, sign, encrypt)
		case strings.EqualFold(mode, "Sign"):
			out = append(out, sign)
		case strings.EqualFold(mode, "SignAndEncrypt"):
			out = append(out, encrypt)
		default:
			return nil, fmt.Errorf("unknown mode %q (Sign, SignAndEncrypt)", mode)
		}
	}
	return out, nil
}

// ParseUsers parses user:password pairs ("operator:secret,viewer:pw"),
// Config.Users; an empty list gives nil: no user name token.
func ParseUsers(s string) (map[string]string, error) {
	list := splitList(s)
	if len(list) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(list))
	for i, x := range list {
		u, p, ok := strings.Cut(x, ":")
		if !ok || u == "" {
			return nil, fmt.Errorf("entry %d is not user:password", i+1)
		}
		out[u] = p
	}
	return out, nil
}
