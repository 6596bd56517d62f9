package client

import (
	"fmt"
	"slices"
	"strings"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// TransportProfileBinary is the transport profile of opc.tcp with the UA binary
// encoding, the only one this stack speaks.
const TransportProfileBinary = "http://opcfoundation.org/UA-Profile/Transport/uatcp-uasc-uabinary"

// EndpointCriteria say which endpoint SelectEndpoint may pick.
type EndpointCriteria struct {
	// SecurityPolicy is a policy URI; "" means any supported, non-deprecated one.
	SecurityPolicy string
	// SecurityMode is the mode; MessageSecurityModeInvalid means any.
	SecurityMode ua.MessageSecurityMode
	// TokenType is the user identity token the endpoint must accept.
	TokenType ua.UserTokenType
	// AllowDeprecated permits Basic128Rsa15 and Basic256 when SecurityPolicy names
	// them. They are never picked as "any".
	AllowDeprecated bool
}

// SelectEndpoint picks the endpoint that meets the criteria with the highest
// security: the highest SecurityLevel the server assigned, then the stronger mode,
// then the stronger policy. It returns a copy. When none fits, the error wraps
// ErrNoEndpoint and lists what the server offers.
func SelectEndpoint(endpoints []ua.EndpointDescription, crit EndpointCriteria) (*ua.EndpointDescription, error) {
	policies := uasc.Policies()
	rank := func(uri string) int {
		return slices.IndexFunc(policies, func(p *uasc.Policy) bool { return p.URI == uri })
	}
	var best *ua.EndpointDescription
	tokenMissing := false
	for i := range endpoints {
		ep := &endpoints[i]
		if ep.TransportProfileURI != "" && ep.TransportProfileURI != TransportProfileBinary {
			continue
		}
		pol, err := uasc.PolicyByURI(ep.SecurityPolicyURI)
		if err != nil {
			continue
		}
		if crit.SecurityPolicy != "" {
			if ep.SecurityPolicyURI != crit.SecurityPolicy || (pol.Deprecated && !crit.AllowDeprecated) {
				continue
			}
		} else if pol.Deprecated {
			continue
		}
		switch ep.SecurityMode {
		case ua.MessageSecurityModeNone, ua.MessageSecurityModeSign, ua.MessageSecurityModeSignAndEncrypt:
		default:
			continue
		}
		if pol.IsNone() != (ep.SecurityMode == ua.MessageSecurityModeNone) {
			continue // inconsistent endpoint
		}
		if crit.SecurityMode != ua.MessageSecurityModeInvalid && ep.SecurityMode != crit.SecurityMode {
			continue
		}
		if findTokenPolicy(ep, crit.TokenType) == nil {
			tokenMissing = true
			continue
		}
		if best == nil || better(ep, best, rank) {
			best = ep
		}
	}
	if best == nil {
		want := "policy " + policyName(crit.SecurityPolicy) + ", mode " + modeNameOrAny(crit.SecurityMode)
		if tokenMissing {
			want += ", " + tokenName(crit.TokenType) + " token"
		}
		return nil, fmt.Errorf("%w for %s; the server offers %s", ErrNoEndpoint, want, describeEndpoints(endpoints))
	}
	ep := *best
	return &ep, nil
}

func better(a, b *ua.EndpointDescription, rank func(string) int) bool {
	if a.SecurityLevel != b.SecurityLevel {
		return a.SecurityLevel > b.SecurityLevel
	}
	if a.SecurityMode != b.SecurityMode {
		return a.SecurityMode > b.SecurityMode
	}
	return rank(a.SecurityPolicyURI) > rank(b.SecurityPolicyURI)
}

// findTokenPolicy returns the endpoint's first user token policy of type t.
func findTokenPolicy(ep *ua.EndpointDescription, t ua.UserTokenType) *ua.UserTokenPolicy {
	for i := range ep.UserIdentityTokens {
		if ep.UserIdentityTokens[i].TokenType == t {
			return &ep.UserIdentityTokens[i]
		}
	}
	return nil
}

// describeEndpoints lists endpoints as "Policy/Mode [tokens]" for error messages.
func describeEndpoints(endpoints []ua.EndpointDescription) string {
	if len(endpoints) == 0 {
		return "no endpoints"
	}
	var b strings.Builder
	for i := range endpoints {
		ep := &endpoints[i]
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(policyName(ep.SecurityPolicyURI))
		b.WriteByte('/')
		b.WriteString(modeName(ep.SecurityMode))
		b.WriteString(" [")
		for j, t := range ep.UserIdentityTokens {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(tokenName(t.TokenType))
		}
		b.WriteByte(']')
	}
	return b.String()
}

func policyName(uri string) string {
	if uri == "" {
		return "any"
	}
	if p, err := uasc.PolicyByURI(uri); err == nil {
		return p.Name
	}
	return uri
}

func modeNameOrAny(m ua.MessageSecurityMode) string {
	if m == ua.MessageSecurityModeInvalid {
		return "any"
	}
	return modeName(m)
}

func tokenName(t ua.UserTokenType) string {
	switch t {
	case ua.UserTokenTypeAnonymous:
		return "Anonymous"
	case ua.UserTokenTypeUserName:
		return "UserName"
	case ua.UserTokenTypeCertificate:
		return "X509"
	case ua.UserTokenTypeIssuedToken:
		return "IssuedToken"
	}
	return t.String()
}
