package publishednodes

import (
	"strings"

	"github.com/uagate/gateway/bridge/config"
)

// Entries describes c as OPC Publisher entries, one per dataset writer (OPC
// Publisher's GetConfiguredEndpoints): what Publish maps, the other way, so
// that an entry read back and published again lands where it came from.
// Passwords are not given back; nodes only when asked.
func Entries(c *config.Config, nodes bool) []Entry {
	out := []Entry{}
	for gi := range c.WriterGroups {
		out = append(out, GroupEntries(c, &c.WriterGroups[gi], nodes)...)
	}
	return out
}

// GroupEntries is Entries for the writers of one group of c.
func GroupEntries(c *config.Config, g *config.WriterGroup, nodes bool) []Entry {
	var ep *config.Endpoint
	for i := range c.Endpoints {
		if c.Endpoints[i].Name == g.Endpoint {
			ep = &c.Endpoints[i]
		}
	}
	out := make([]Entry, 0, len(g.Writers))
	for wi := range g.Writers {
		w := &g.Writers[wi]
		e := Entry{DataSetWriterGroup: g.Name, DataSetWriterID: w.Name}
		if ep != nil {
			endpointEntry(ep, &e)
		}
		if g.PublishingInterval != 0 {
			e.DataSetPublishingInterval = ms(g.PublishingInterval)
		}
		if g.KeyFrameCount != 0 {
			k := float64(g.KeyFrameCount)
			e.DataSetKeyFrameCount = &k
		}
		switch g.Format {
		case config.FormatSamples:
			e.MessagingMode = "Samples"
		case config.FormatPart14:
			e.MessagingMode = "PubSub"
		}
		if nodes {
			e.OpcNodes = OpcNodes(w)
		}
		out = append(out, e)
	}
	return out
}

func endpointEntry(ep *config.Endpoint, e *Entry) {
	e.EndpointURL = ep.URL
	secure := !strings.EqualFold(ep.SecurityMode, "None")
	e.UseSecurity = &secure
	switch strings.ToLower(ep.SecurityMode) {
	case "none":
		e.EndpointSecurityMode = "None"
	case "sign":
		e.EndpointSecurityMode = "Sign"
	case "signandencrypt":
		e.EndpointSecurityMode = "SignAndEncrypt"
	default:
		e.EndpointSecurityMode = "Best"
	}
	if p := ep.SecurityPolicy; p != "" && !strings.EqualFold(p, config.SecurityBest) && !strings.EqualFold(p, "None") {
		e.EndpointSecurityPolicy = p
	}
	switch ep.Identity.Type {
	case config.IdentityUsername:
		e.OpcAuthenticationMode, e.OpcAuthenticationUsername = "UsernamePassword", ep.Identity.Username
	case config.IdentityX509:
		e.OpcAuthenticationMode = "Certificate"
	default:
		e.OpcAuthenticationMode = "Anonymous"
	}
}

func ms(d config.Duration) *float64 {
	v := float64(d) / 1e6
	return &v
}

// OpcNodes describes the fields of a writer as OPC Publisher's nodes.
func OpcNodes(w *config.DataSetWriter) []OpcNode {
	out := []OpcNode{}
	for i := range w.Fields {
		f := &w.Fields[i]
		n := OpcNode{ID: f.Node, DataSetFieldID: f.Name}
		if f.SamplingInterval != nil {
			n.OpcSamplingInterval = ms(*f.SamplingInterval)
		}
		if f.Heartbeat != 0 {
			s := f.Heartbeat.D().Seconds()
			n.HeartbeatInterval = &s
		}
		if f.QueueSize != 0 {
			q := float64(f.QueueSize)
			n.QueueSize = &q
		}
		if f.DiscardOldest != nil {
			dn := !*f.DiscardOldest
			n.DiscardNew = &dn
		}
		for _, t := range triggers {
			if t[1] == f.Trigger {
				n.DataChangeTrigger = t[0]
			}
		}
		switch f.Deadband.Type {
		case config.DeadbandAbsolute, config.DeadbandPercent:
			n.DeadbandType = strings.ToUpper(f.Deadband.Type[:1]) + f.Deadband.Type[1:]
			v := f.Deadband.Value
			n.DeadbandValue = &v
		}
		if ev := f.Events; ev != nil {
			n.EventFilter = &EventFilter{TypeDefinitionID: ev.OfType}
			for _, s := range ev.Select {
				n.EventFilter.SelectClauses = append(n.EventFilter.SelectClauses, SelectClause{BrowsePath: strings.Split(s, "/")})
			}
		}
		out = append(out, n)
	}
	return out
}
