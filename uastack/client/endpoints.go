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

// EndpointMismatchError is the refusal of a session whose CreateSession response
// lists other endpoints than GetEndpoints did (Part 4 §5.6.2). GetEndpoints runs
// on an unsecured channel, CreateSession on the secured one: a difference means
// someone on the network path altered the discovery answer, to steer the client
// to a weaker endpoint (a stripped list) or to one that is not the server's.
// Only the fields Part 4 tells the client to verify are compared: EndpointURL,
// SecurityMode, SecurityPolicyURI, UserIdentityTokens, TransportProfileURI,
// SecurityLevel and Server.ApplicationURI. It unwraps to ErrServerEndpoints
// (BadSecurityChecksFailed).
type EndpointMismatchError struct {
	// Missing are endpoints GetEndpoints returned that CreateSession does not.
	Missing []ua.EndpointDescription
	// Extra are endpoints CreateSession returned that GetEndpoints did not.
	Extra []ua.EndpointDescription
	// Changed are endpoints both returned (the same URL, policy and mode) with
	// other compared fields.
	Changed []EndpointChange
}

// EndpointChange is one endpoint that GetEndpoints and CreateSession describe
// differently.
type EndpointChange struct {
	Discovered, Session ua.EndpointDescription
	Fields              []string // the compared fields that differ, e.g. "SecurityLevel"
}

func (e *EndpointMismatchError) Error() string {
	var b strings.Builder
	b.WriteString("client: the endpoints of CreateSession differ from those of GetEndpoints (a sign of tampering with the discovery answer):")
	for i := range e.Missing {
		b.WriteString(" missing from CreateSession: ")
		b.WriteString(describeEndpoint(&e.Missing[i]))
		b.WriteByte(';')
	}
	for i := range e.Extra {
		b.WriteString(" missing from GetEndpoints: ")
		b.WriteString(describeEndpoint(&e.Extra[i]))
		b.WriteByte(';')
	}
	for _, c := range e.Changed {
		fmt.Fprintf(&b, " %s differs in %s (GetEndpoints: %s; CreateSession: %s);",
			policyName(c.Discovered.SecurityPolicyURI)+"/"+modeName(c.Discovered.SecurityMode),
			strings.Join(c.Fields, ", "), describeFields(&c.Discovered, c.Fields), describeFields(&c.Session, c.Fields))
	}
	return strings.TrimSuffix(b.String(), ";")
}

func (e *EndpointMismatchError) Unwrap() error { return ErrServerEndpoints }

// compareEndpoints checks the endpoints CreateSession returned against those
// GetEndpoints returned for the same server (appURI), as multisets: the order
// may differ, nothing else. It returns nil or an *EndpointMismatchError.
func compareEndpoints(discovered, session []ua.EndpointDescription, appURI string) error {
	var disc []*ua.EndpointDescription
	for i := range discovered {
		// GetEndpoints of a discovery server may list other servers' endpoints;
		// CreateSession lists only those of the server we asked for.
		if discovered[i].Server.ApplicationURI == appURI {
			disc = append(disc, &discovered[i])
		}
	}
	sess := make([]*ua.EndpointDescription, len(session))
	for i := range session {
		sess[i] = &session[i]
	}
	// Equal endpoints cancel out; what remains differs.
	for i := 0; i < len(disc); i++ {
		k := endpointKey(disc[i])
		if j := slices.IndexFunc(sess, func(s *ua.EndpointDescription) bool { return endpointKey(s) == k }); j >= 0 {
			sess = slices.Delete(sess, j, j+1)
			disc = slices.Delete(disc, i, i+1)
			i--
		}
	}
	if len(disc) == 0 && len(sess) == 0 {
		return nil
	}
	e := &EndpointMismatchError{}
	for _, d := range disc {
		j := slices.IndexFunc(sess, func(s *ua.EndpointDescription) bool {
			return s.EndpointURL == d.EndpointURL && s.SecurityPolicyURI == d.SecurityPolicyURI && s.SecurityMode == d.SecurityMode
		})
		if j < 0 {
			e.Missing = append(e.Missing, *d)
			continue
		}
		e.Changed = append(e.Changed, EndpointChange{Discovered: *d, Session: *sess[j], Fields: endpointDiff(d, sess[j])})
		sess = slices.Delete(sess, j, j+1)
	}
	for _, s := range sess {
		e.Extra = append(e.Extra, *s)
	}
	return e
}

// endpointKey is the identity of an endpoint for compareEndpoints: the compared
// fields, user token policies in a canonical order.
func endpointKey(ep *ua.EndpointDescription) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q %d %q %q %d", ep.EndpointURL, ep.Server.ApplicationURI, ep.SecurityMode,
		ep.SecurityPolicyURI, ep.TransportProfileURI, ep.SecurityLevel)
	b.WriteString(tokensKey(ep.UserIdentityTokens))
	return b.String()
}

func tokensKey(toks []ua.UserTokenPolicy) string {
	keys := make([]string, len(toks))
	for i, t := range toks {
		keys[i] = fmt.Sprintf(" [%q %d %q %q %q]", t.PolicyID, t.TokenType, t.IssuedTokenType, t.IssuerEndpointURL, t.SecurityPolicyURI)
	}
	slices.Sort(keys)
	return strings.Join(keys, "")
}

// endpointDiff names the compared fields in which a and b differ.
func endpointDiff(a, b *ua.EndpointDescription) []string {
	var out []string
	if a.Server.ApplicationURI != b.Server.ApplicationURI {
		out = append(out, "Server.ApplicationURI")
	}
	if a.TransportProfileURI != b.TransportProfileURI {
		out = append(out, "TransportProfileURI")
	}
	if a.SecurityLevel != b.SecurityLevel {
		out = append(out, "SecurityLevel")
	}
	if tokensKey(a.UserIdentityTokens) != tokensKey(b.UserIdentityTokens) {
		out = append(out, "UserIdentityTokens")
	}
	return out
}

// describeEndpoint is "Policy/Mode [tokens] level N at URL" for errors.
func describeEndpoint(ep *ua.EndpointDescription) string {
	return fmt.Sprintf("%s level %d at %s", describeEndpoints([]ua.EndpointDescription{*ep}), ep.SecurityLevel, ep.EndpointURL)
}

// describeFields shows the named fields of ep.
func describeFields(ep *ua.EndpointDescription, fields []string) string {
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		switch f {
		case "Server.ApplicationURI":
			parts = append(parts, fmt.Sprintf("%s %q", f, ep.Server.ApplicationURI))
		case "TransportProfileURI":
			parts = append(parts, fmt.Sprintf("%s %q", f, ep.TransportProfileURI))
		case "SecurityLevel":
			parts = append(parts, fmt.Sprintf("%s %d", f, ep.SecurityLevel))
		case "UserIdentityTokens":
			var toks []string
			for _, t := range ep.UserIdentityTokens {
				pol := "channel's policy"
				if t.SecurityPolicyURI != "" {
					pol = policyName(t.SecurityPolicyURI)
				}
				toks = append(toks, tokenName(t.TokenType)+"("+t.PolicyID+", "+pol+")")
			}
			parts = append(parts, f+" ["+strings.Join(toks, " ")+"]")
		}
	}
	return strings.Join(parts, ", ")
}
