package config

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// OPC Publisher's published nodes file (publishednodes.json), read as it is:
// a JSON array of entries, each an endpoint with its nodes. JSON is YAML, so
// the same parser reads it, with positions for the warnings; keys are matched
// case-insensitively, as OPC Publisher's JSON reader does. The grouping
// follows OPC Publisher: the same endpoint and security make one endpoint
// (one session), the same endpoint and DataSetWriterGroup one writer group,
// the same DataSetWriterId and publishing interval one writer. Since our
// writer group is one subscription with one publishing interval, a writer
// group with writers of different intervals becomes one group per interval.

// stripJSONComments blanks // and /* */ comments outside strings (the files
// of OPC Publisher's documentation have them), keeping every other byte and
// every newline where it was so that positions stay right.
func stripJSONComments(data []byte) []byte {
	out := bytes.Clone(data)
	inString, escaped := false, false
	for i := 0; i < len(out); i++ {
		c := out[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			out[i], out[i+1] = ' ', ' '
			for i += 2; i < len(out); i++ {
				if out[i] == '*' && i+1 < len(out) && out[i+1] == '/' {
					out[i], out[i+1] = ' ', ' '
					i++
					break
				}
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
		}
	}
	return out
}

// isPublishedNodes reports whether data is a published nodes file: a JSON
// array whose first element is an object with an EndpointUrl.
func isPublishedNodes(data []byte) bool {
	s := bytes.TrimSpace(stripJSONComments(data))
	s = bytes.TrimPrefix(s, []byte("\xef\xbb\xbf")) // a BOM, as Windows editors write
	if len(s) == 0 || s[0] != '[' {
		return false
	}
	s = bytes.TrimSpace(s[1:])
	if len(s) == 0 || s[0] != '{' {
		return false
	}
	// The key may come after others: look for it in the first object, which
	// ends at the first "}" or "]" at depth 0 of the object (a cheap scan is
	// enough to tell the formats apart; the parser does the rest).
	return bytes.Contains(bytes.ToLower(s[:min(len(s), 1<<16)]), []byte(`"endpointurl"`))
}

// pnObject is a JSON object of the file with case-insensitive key lookup.
type pnObject struct {
	node ast.Node
	keys map[string]*ast.MappingValueNode // lower-cased, trimmed key → entry
	used map[string]bool
	path string // for warnings: "[3].OpcNodes[1]"
}

func (d *decoder) pnObject(n ast.Node, path string) (*pnObject, bool) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		if mv, ok1 := n.(*ast.MappingValueNode); ok1 {
			m = &ast.MappingNode{Values: []*ast.MappingValueNode{mv}}
		} else {
			d.errorf(n, path, "want a JSON object, got %s", kindName(n))
			return nil, false
		}
	}
	o := &pnObject{node: n, keys: map[string]*ast.MappingValueNode{}, used: map[string]bool{}, path: path}
	for _, mv := range m.Values {
		k, _ := scalarText(mv.Key)
		o.keys[strings.ToLower(strings.TrimSpace(k))] = mv
	}
	return o, true
}

// get returns the value of key (nil when absent or null) and marks it used.
func (o *pnObject) get(key string) (ast.Node, *ast.MappingValueNode) {
	k := strings.ToLower(key)
	mv, ok := o.keys[k]
	if !ok {
		return nil, nil
	}
	o.used[k] = true
	if _, null := mv.Value.(*ast.NullNode); null {
		return nil, mv
	}
	return mv.Value, mv
}

func (d *decoder) pnString(o *pnObject, key string) string {
	v, _ := o.get(key)
	if v == nil {
		return ""
	}
	s, ok := scalarText(v)
	if !ok {
		d.errorf(v, o.path+"."+key, "want a string, got %s", kindName(v))
	}
	return s
}

func (d *decoder) pnBool(o *pnObject, key string) (value, set bool) {
	v, _ := o.get(key)
	if v == nil {
		return false, false
	}
	if b, ok := v.(*ast.BoolNode); ok {
		return b.Value, true
	}
	if s, ok := v.(*ast.StringNode); ok { // "true" as a string, as some tools write
		if b, err := strconv.ParseBool(s.Value); err == nil {
			return b, true
		}
	}
	d.errorf(v, o.path+"."+key, "want true or false, got %s", kindName(v))
	return false, false
}

func (d *decoder) pnNumber(o *pnObject, key string) (float64, bool) {
	v, _ := o.get(key)
	if v == nil {
		return 0, false
	}
	if f, ok := number(v); ok {
		return f, true
	}
	if s, ok := v.(*ast.StringNode); ok {
		if f, err := strconv.ParseFloat(s.Value, 64); err == nil {
			return f, true
		}
	}
	d.errorf(v, o.path+"."+key, "want a number, got %s", kindName(v))
	return 0, false
}

// pnInterval reads key (a number of unit) and key+"Timespan" (a TimeSpan
// string, which wins as in OPC Publisher).
func (d *decoder) pnInterval(o *pnObject, key string, unit time.Duration) (Duration, bool) {
	if v, _ := o.get(key + "Timespan"); v != nil {
		s, ok := v.(*ast.StringNode)
		if !ok {
			d.errorf(v, o.path+"."+key+"Timespan", "want a TimeSpan string such as \"00:00:01\", got %s", kindName(v))
			return 0, false
		}
		dur, err := ParseDuration(s.Value)
		if err != nil {
			d.errorf(v, o.path+"."+key+"Timespan", "%v", err)
			return 0, false
		}
		o.get(key) // the number is ignored when the TimeSpan is given
		return dur, true
	}
	f, ok := d.pnNumber(o, key)
	if !ok {
		return 0, false
	}
	if f < 0 || f > float64(1<<62)/float64(unit) {
		_, mv := o.get(key)
		d.errorf(mv.Value, o.path+"."+key, "%v is out of range", f)
		return 0, false
	}
	return Duration(f * float64(unit)), true
}

// Keys of the format that are documented but have no counterpart here: a
// warning names each one found.
var (
	pnEntryIgnored = []string{"UseReverseConnect", "DataSetClassId", "DataSetDescription", "DataSetExtensionFields",
		"MetaDataUpdateTime", "MetaDataUpdateTimeTimespan", "SendKeepAliveDataSetMessages", "WriterGroupTransport",
		"WriterGroupQualityOfService", "BatchSize", "BatchTriggerInterval", "BatchTriggerIntervalTimespan",
		"Version", "LastChangeTimespan", "DataSetWriterWatchdogBehavior", "WriterGroupPartitions", "DataSetRouting",
		"DataSetSamplingInterval", "DataSetSamplingIntervalTimespan", "Priority", "DumpConnectionDiagnostics",
		"EncryptedAuthPassword", "EncryptedAuthUsername", "WriterGroupMessageTtlTimepan", "WriterGroupMessageRetention",
		"QualityOfService", "MessageRetention", "MessageTtlTimespan", "OpcNodeWatchdogTimespan", "OpcNodeWatchdogCondition"}
	pnNodeIgnored = []string{"AttributeId", "IndexRange", "UseCyclicRead", "RegisterNode", "FetchDisplayName",
		"SkipFirst", "DataSetClassFieldId", "HeartbeatBehavior", "ConditionHandling", "TriggeredNodes",
		"CyclicReadMaxAge", "CyclicReadMaxAgeTimespan", "ModelChangeHandling", "BrowsePath", "Topic", "QualityOfService",
		"Facet", "EventNotifier"}
)

// warnUnused warns about every key of o that the conversion did not use.
func (d *decoder) warnUnused(o *pnObject, ignored []string) {
	for k, mv := range o.keys {
		if o.used[k] {
			continue
		}
		name, _ := scalarText(mv.Key)
		documented := false
		for _, ig := range ignored {
			if strings.EqualFold(ig, k) {
				documented = true
				break
			}
		}
		if documented {
			d.warnf(mv.Key, o.path+"."+strings.TrimSpace(name), "%s is not supported; ignored", strings.TrimSpace(name))
		} else {
			d.warnf(mv.Key, o.path+"."+strings.TrimSpace(name), "unknown key %q; ignored", name)
		}
	}
}

// pnGroup is a writer group being built, with the positions of its parts.
type pnGroup struct {
	key      string // endpoint + DataSetWriterGroup
	interval Duration
	wg       WriterGroup
	at       ast.Node
	writers  map[string]int
	writerAt []ast.Node
	fieldAt  [][]ast.Node
}

// publishedNodes converts the file into c.
func (d *decoder) publishedNodes(data []byte, c *Config) {
	clean := stripJSONComments(data)
	f, err := parser.ParseBytes(clean, 0)
	if err != nil {
		d.parseYAML(clean) // reports the syntax error with its position
		return
	}
	if len(f.Docs) != 1 || f.Docs[0].Body == nil {
		d.errorf(nil, "", "want one JSON array")
		return
	}
	seq, ok := f.Docs[0].Body.(*ast.SequenceNode)
	if !ok {
		d.errorf(f.Docs[0].Body, "", "want a JSON array of entries, got %s", kindName(f.Docs[0].Body))
		return
	}
	endpointKeys := map[string]int{} // connection settings → index in c.Endpoints
	var endpointAt []ast.Node
	groupNames := map[string]bool{}
	baseNames := map[string]string{} // group key → its name
	var groups []*pnGroup
	groupIndex := map[string]*pnGroup{}
	for i, en := range seq.Values {
		p := "[" + strconv.Itoa(i) + "]"
		if !d.count(en, p) {
			return
		}
		o, ok := d.pnObject(en, p)
		if !ok {
			continue
		}
		ep, ok := d.pnEndpoint(o)
		if !ok {
			d.warnUnused(o, pnEntryIgnored)
			continue
		}
		ekey := strings.Join([]string{ep.URL, ep.SecurityMode, ep.SecurityPolicy, ep.Identity.Type, ep.Identity.Username, ep.Identity.Password.Value}, "\x00")
		ei, ok := endpointKeys[ekey]
		if !ok {
			ei = len(c.Endpoints)
			ep.Name = uniqueName(endpointName(ep.URL), func(n string) bool {
				for _, e := range c.Endpoints {
					if e.Name == n {
						return true
					}
				}
				return false
			})
			endpointKeys[ekey] = ei
			c.Endpoints = append(c.Endpoints, ep)
			endpointAt = append(endpointAt, en)
		}
		epName := c.Endpoints[ei].Name

		groupName := d.pnName(o, "DataSetWriterGroup")
		gkey := epName + "\x00" + groupName
		writerName := d.pnName(o, "DataSetWriterId")
		if writerName == "" {
			writerName = d.pnName(o, "DataSetName")
		} else {
			o.get("DataSetName")
		}
		if writerName == "" {
			writerName = "default"
		}
		entryInterval, _ := d.pnInterval(o, "DataSetPublishingInterval", time.Millisecond)
		keyFrames, hasKeyFrames := d.pnNumber(o, "DataSetKeyFrameCount")
		format := ""
		switch mode := d.pnString(o, "MessagingMode"); strings.ToLower(mode) {
		case "":
		case "samples", "fullsamples":
			format = FormatSamples
		case "pubsub", "fullnetworkmessages", "networkmessages":
			format = FormatPart14
		default:
			_, mv := o.get("MessagingMode")
			d.warnf(mv.Key, p+".MessagingMode", "%q is not supported (Samples or PubSub); ignored", mode)
		}
		if enc := d.pnString(o, "MessageEncoding"); enc != "" && !strings.EqualFold(enc, "Json") {
			_, mv := o.get("MessageEncoding")
			d.warnf(mv.Key, p+".MessageEncoding", "%q is not supported (only Json); ignored", enc)
		}

		nodes := d.pnNodes(o, p)
		d.warnUnused(o, pnEntryIgnored)
		for _, nd := range nodes {
			interval := entryInterval
			if nd.interval != 0 {
				interval = nd.interval
			}
			if interval == 0 {
				interval = Duration(DefaultPublishingInterval)
			}
			k := gkey + "\x00" + interval.String()
			g, ok := groupIndex[k]
			if !ok {
				base, ok := baseNames[gkey]
				name := ""
				if !ok {
					base = groupName
					if base == "" {
						base = epName
					}
					name = uniqueName(base, func(n string) bool { return groupNames[n] })
					baseNames[gkey] = name
					if name != base {
						d.warnf(en, p, "writer group %q is also used with another endpoint or security: this one becomes writer group %q (one endpoint per group)", base, name)
					}
				} else {
					name = uniqueName(base+"_"+interval.String(), func(n string) bool { return groupNames[n] })
					d.warnf(en, p, "writer group %q has writers with publishing interval %v besides %v: they become writer group %q (one subscription per group)",
						base, interval, groups[groupIndexOf(groups, gkey)].interval, name)
				}
				groupNames[name] = true
				g = &pnGroup{key: gkey, interval: interval, at: en, writers: map[string]int{},
					wg: WriterGroup{Name: name, Endpoint: epName, PublishingInterval: interval}}
				groupIndex[k] = g
				groups = append(groups, g)
			}
			if hasKeyFrames && g.wg.KeyFrameCount == 0 && keyFrames > 0 {
				g.wg.KeyFrameCount = int(min(keyFrames, 1<<20))
			}
			if format != "" && g.wg.Format == "" {
				g.wg.Format = format
			}
			wi, ok := g.writers[writerName]
			if !ok {
				wi = len(g.wg.Writers)
				g.writers[writerName] = wi
				g.wg.Writers = append(g.wg.Writers, DataSetWriter{Name: writerName})
				g.writerAt = append(g.writerAt, en)
				g.fieldAt = append(g.fieldAt, nil)
			}
			w := &g.wg.Writers[wi]
			fld := nd.field
			fld.Name = uniqueName(fld.Name, func(n string) bool {
				for _, f := range w.Fields {
					if f.Name == n {
						return true
					}
				}
				return false
			})
			w.Fields = append(w.Fields, fld)
			g.fieldAt[wi] = append(g.fieldAt[wi], nd.at)
		}
	}
	for i, at := range endpointAt {
		d.pos["endpoints["+strconv.Itoa(i)+"]"] = d.at(at)
	}
	for gi, g := range groups {
		gp := "writerGroups[" + strconv.Itoa(gi) + "]"
		d.pos[gp] = d.at(g.at)
		for wi := range g.wg.Writers {
			wp := gp + ".writers[" + strconv.Itoa(wi) + "]"
			d.pos[wp] = d.at(g.writerAt[wi])
			for fi, at := range g.fieldAt[wi] {
				d.pos[wp+".fields["+strconv.Itoa(fi)+"]"] = d.at(at)
			}
		}
		c.WriterGroups = append(c.WriterGroups, g.wg)
	}
}

func groupIndexOf(groups []*pnGroup, key string) int {
	for i, g := range groups {
		if g.key == key {
			return i
		}
	}
	return 0
}

// pnName reads a name that becomes a topic level, replacing what a topic
// level cannot hold.
func (d *decoder) pnName(o *pnObject, key string) string {
	s := d.pnString(o, key)
	clean := strings.Map(func(r rune) rune {
		if strings.ContainsRune("/+#*>", r) || r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, s)
	if clean != s {
		_, mv := o.get(key)
		d.warnf(mv.Value, o.path+"."+key, "%q holds characters a topic level cannot: %q is used", s, clean)
	}
	return clean
}

// endpointName names an endpoint after its host and port.
func endpointName(raw string) string {
	host := raw
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		host = u.Host
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, host)
	if name == "" {
		name = "endpoint"
	}
	return name
}

// uniqueName returns name, or name_2, name_3 … whichever is not taken.
func uniqueName(name string, taken func(string) bool) string {
	if !taken(name) {
		return name
	}
	for i := 2; ; i++ {
		if n := name + "_" + strconv.Itoa(i); !taken(n) {
			return n
		}
	}
}

// pnEndpoint reads the connection settings of an entry.
func (d *decoder) pnEndpoint(o *pnObject) (Endpoint, bool) {
	var ep Endpoint
	ep.URL = d.pnString(o, "EndpointUrl")
	if ep.URL == "" {
		d.errorf(o.node, o.path+".EndpointUrl", "missing")
		return ep, false
	}
	if sec, set := d.pnBool(o, "UseSecurity"); set && sec {
		ep.SecurityMode, ep.SecurityPolicy = "SignAndEncrypt", SecurityBest
	} else {
		ep.SecurityMode, ep.SecurityPolicy = "None", "None"
	}
	if m := d.pnString(o, "EndpointSecurityMode"); m != "" {
		if strings.EqualFold(m, "Best") {
			m = SecurityBest
		}
		ep.SecurityMode = m
		if !strings.EqualFold(m, "None") && ep.SecurityPolicy == "None" {
			ep.SecurityPolicy = SecurityBest
		}
		if strings.EqualFold(m, "None") {
			ep.SecurityPolicy = "None"
		}
	}
	if p := d.pnString(o, "EndpointSecurityPolicy"); p != "" {
		ep.SecurityPolicy = p
		if ep.SecurityMode == "None" && !strings.EqualFold(p, "None") && !strings.HasSuffix(p, "#None") {
			ep.SecurityMode = SecurityBest
		}
	}
	user := d.pnString(o, "OpcAuthenticationUsername")
	pw, pwEntry := o.get("OpcAuthenticationPassword")
	switch mode := d.pnString(o, "OpcAuthenticationMode"); strings.ToLower(mode) {
	case "", "anonymous":
		ep.Identity.Type = IdentityAnonymous
	case "usernamepassword":
		ep.Identity.Type = IdentityUsername
		ep.Identity.Username = user
		if pw != nil {
			s, ok := scalarText(pw)
			if !ok {
				d.errorf(pw, o.path+".OpcAuthenticationPassword", "want a string, got %s", kindName(pw))
			}
			ep.Identity.Password.Value = s
			d.warnf(pwEntry.Key, o.path+".OpcAuthenticationPassword", "inline password; in a YAML configuration it can come from a file or the environment ({file: …}, {env: …})")
		}
	case "certificate":
		_, mv := o.get("OpcAuthenticationMode")
		d.errorf(mv.Value, o.path+".OpcAuthenticationMode", "Certificate names a certificate in OPC Publisher's user store, which this gateway does not have: use a YAML configuration with identity type x509, certFile and keyFile")
	default:
		_, mv := o.get("OpcAuthenticationMode")
		d.errorf(mv.Value, o.path+".OpcAuthenticationMode", "%q: want Anonymous, UsernamePassword or Certificate", mode)
	}
	return ep, true
}

// pnNode is a converted OpcNodes element.
type pnNode struct {
	field    Field
	interval Duration // OpcPublishingInterval, 0 when not given
	at       ast.Node
}

func (d *decoder) pnNodes(o *pnObject, p string) []pnNode {
	var elems []ast.Node
	if v, _ := o.get("OpcNodes"); v != nil {
		seq, ok := v.(*ast.SequenceNode)
		if !ok {
			d.errorf(v, p+".OpcNodes", "want a JSON array, got %s", kindName(v))
			return nil
		}
		elems = seq.Values
	} else if legacy, _ := o.get("NodeId"); legacy != nil {
		// The format of OPC Publisher 2.5 and before: one node per entry.
		elems = []ast.Node{legacy}
	}
	var out []pnNode
	for j, e := range elems {
		np := p + ".OpcNodes[" + strconv.Itoa(j) + "]"
		if !d.count(e, np) {
			return out
		}
		n, ok := d.pnObject(e, np)
		if !ok {
			continue
		}
		nd, ok := d.pnNode(n)
		d.warnUnused(n, pnNodeIgnored)
		if ok {
			out = append(out, nd)
		}
	}
	return out
}

func (d *decoder) pnNode(n *pnObject) (pnNode, bool) {
	nd := pnNode{at: n.node}
	f := &nd.field
	id := d.pnString(n, "Id")
	if x := d.pnString(n, "ExpandedNodeId"); id == "" {
		id = x
	}
	if id == "" {
		id = d.pnString(n, "Identifier") // 2.5: "NodeId": {"Identifier": …}
	}
	if id == "" {
		d.errorf(n.node, n.path+".Id", "missing: Id or ExpandedNodeId")
		return nd, false
	}
	f.Node = iiotNodeID(id)
	f.Name = d.pnString(n, "DataSetFieldId")
	if dn := d.pnString(n, "DisplayName"); f.Name == "" {
		f.Name = dn
	}
	if f.Name == "" {
		f.Name = f.Node
	}
	if si, ok := d.pnInterval(n, "OpcSamplingInterval", time.Millisecond); ok {
		f.SamplingInterval = &si
	}
	if pi, ok := d.pnInterval(n, "OpcPublishingInterval", time.Millisecond); ok {
		nd.interval = pi
	}
	if hb, ok := d.pnInterval(n, "HeartbeatInterval", time.Second); ok {
		f.Heartbeat = hb
	}
	if q, ok := d.pnNumber(n, "QueueSize"); ok {
		if q < 0 || q > MaxQueueSize {
			_, mv := n.get("QueueSize")
			d.errorf(mv.Value, n.path+".QueueSize", "%v: want 0 to %d", q, MaxQueueSize)
		} else {
			f.QueueSize = uint32(q)
		}
	}
	if dn, set := d.pnBool(n, "DiscardNew"); set {
		old := !dn
		f.DiscardOldest = &old
	}
	if t := d.pnString(n, "DataChangeTrigger"); t != "" {
		switch strings.ToLower(t) {
		case "status":
			f.Trigger = TriggerStatus
		case "statusvalue":
			f.Trigger = TriggerStatusValue
		case "statusvaluetimestamp":
			f.Trigger = TriggerStatusValueTimestamp
		default:
			_, mv := n.get("DataChangeTrigger")
			d.errorf(mv.Value, n.path+".DataChangeTrigger", "%q: want Status, StatusValue or StatusValueTimestamp", t)
		}
	}
	if t := d.pnString(n, "DeadbandType"); t != "" {
		_, tmv := n.get("DeadbandType")
		v, _ := d.pnNumber(n, "DeadbandValue")
		switch strings.ToLower(t) {
		case "absolute":
			if v < 0 {
				d.warnf(tmv.Key, n.path+".DeadbandValue", "%v is negative: taken as 0, as OPC Publisher does", v)
				v = 0
			}
			f.Deadband = Deadband{DeadbandAbsolute, v}
		case "percent":
			if v < 0 || v > 100 {
				c := min(max(v, 0), 100)
				d.warnf(tmv.Key, n.path+".DeadbandValue", "%v is not from 0 to 100: clamped to %v, as OPC Publisher does", v, c)
				v = c
			}
			f.Deadband = Deadband{DeadbandPercent, v}
		case "none":
		default:
			d.errorf(tmv.Value, n.path+".DeadbandType", "%q: want Absolute or Percent", t)
		}
	} else {
		n.get("DeadbandValue") // ignored without a type, as documented
	}
	if ef, _ := n.get("EventFilter"); ef != nil {
		f.Events = d.pnEventFilter(ef, n.path+".EventFilter")
		if f.Events != nil {
			f.SamplingInterval, f.QueueSize, f.Deadband, f.Trigger, f.Heartbeat = nil, 0, Deadband{}, "", 0
		}
	}
	return nd, true
}

// iiotNodeID converts the "{namespace URI}#{identifier}" form of OPC Publisher
// to nsu=<uri>;<identifier>; other forms are returned as they are.
func iiotNodeID(s string) string {
	for _, p := range []string{"ns=", "nsu=", "i=", "s=", "g=", "b=", "svr="} {
		if strings.HasPrefix(s, p) {
			return s
		}
	}
	i := strings.LastIndexByte(s, '#')
	if i <= 0 || i == len(s)-1 {
		return s
	}
	uri := strings.ReplaceAll(strings.ReplaceAll(s[:i], "%", "%25"), ";", "%3B")
	return "nsu=" + uri + ";" + s[i+1:]
}

const baseEventType = "i=2041"

func (d *decoder) pnEventFilter(n ast.Node, p string) *EventSelect {
	o, ok := d.pnObject(n, p)
	if !ok {
		return nil
	}
	ev := &EventSelect{}
	ev.OfType = d.pnString(o, "TypeDefinitionId")
	if v, _ := o.get("SelectClauses"); v != nil {
		seq, ok := v.(*ast.SequenceNode)
		if !ok {
			d.errorf(v, p+".SelectClauses", "want a JSON array, got %s", kindName(v))
		} else {
			ev.Select = []string{}
			for j, e := range seq.Values {
				sp := p + ".SelectClauses[" + strconv.Itoa(j) + "]"
				sc, ok := d.pnObject(e, sp)
				if !ok {
					continue
				}
				if s, ok := d.pnSelectClause(sc); ok {
					ev.Select = append(ev.Select, s)
				}
				d.warnUnused(sc, []string{"DataSetClassFieldId", "AttributeId", "IndexRange", "DisplayName"})
			}
			if len(ev.Select) == 0 {
				d.warnf(v, p+".SelectClauses", "no select clause could be mapped: the default event fields are selected")
				ev.Select = nil
			}
		}
	}
	if w, mv := o.get("WhereClause"); w != nil {
		if t, ok := d.pnOfType(w); ok {
			if ev.OfType != "" && ev.OfType != t {
				d.warnf(mv.Key, p+".WhereClause", "OfType %s and TypeDefinitionId %s differ: %s is used", t, ev.OfType, t)
			}
			ev.OfType = t
		} else {
			d.warnf(mv.Key, p+".WhereClause", "only a WhereClause of a single OfType element is mapped; this one is ignored, so events are not filtered by it")
		}
	}
	d.warnUnused(o, nil)
	return ev
}

func (d *decoder) pnSelectClause(sc *pnObject) (string, bool) {
	if t := d.pnString(sc, "TypeDefinitionId"); t != "" && t != baseEventType && !strings.HasSuffix(t, ";i=2041") {
		_, mv := sc.get("TypeDefinitionId")
		d.warnf(mv.Key, sc.path+".TypeDefinitionId", "%s: select clauses are taken relative to BaseEventType", t)
	}
	v, mv := sc.get("BrowsePath")
	seq, ok := v.(*ast.SequenceNode)
	if v == nil || !ok {
		if mv == nil {
			d.warnf(sc.node, sc.path, "no BrowsePath; ignored")
		} else {
			d.warnf(v, sc.path+".BrowsePath", "want a JSON array of browse names; ignored")
		}
		return "", false
	}
	var parts []string
	for _, e := range seq.Values {
		s, ok := scalarText(e)
		s = strings.TrimPrefix(s, "/")
		if !ok || s == "" {
			d.warnf(e, sc.path+".BrowsePath", "want browse names; this clause is ignored")
			return "", false
		}
		if strings.Contains(s, "#") || strings.Contains(s, "://") {
			d.warnf(e, sc.path+".BrowsePath", "%q names its namespace by URI, which select clauses here cannot: use <index>:<name>; this clause is ignored", s)
			return "", false
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "", false
	}
	return strings.Join(parts, "/"), true
}

// pnOfType recognises a where clause of one OfType element and returns its
// type node id.
func (d *decoder) pnOfType(w ast.Node) (string, bool) {
	o, ok := w.(*ast.MappingNode)
	if !ok {
		return "", false
	}
	var elems *ast.SequenceNode
	for _, mv := range o.Values {
		if k, _ := scalarText(mv.Key); strings.EqualFold(k, "Elements") {
			elems, _ = mv.Value.(*ast.SequenceNode)
		}
	}
	if elems == nil || len(elems.Values) != 1 {
		return "", false
	}
	el, ok := elems.Values[0].(*ast.MappingNode)
	if !ok {
		return "", false
	}
	var op string
	var operands *ast.SequenceNode
	for _, mv := range el.Values {
		switch k, _ := scalarText(mv.Key); strings.ToLower(k) {
		case "filteroperator":
			op, _ = scalarText(mv.Value)
		case "filteroperands":
			operands, _ = mv.Value.(*ast.SequenceNode)
		}
	}
	if !strings.EqualFold(op, "OfType") || operands == nil || len(operands.Values) != 1 {
		return "", false
	}
	operand, ok := operands.Values[0].(*ast.MappingNode)
	if !ok {
		return "", false
	}
	for _, mv := range operand.Values {
		if k, _ := scalarText(mv.Key); strings.EqualFold(k, "Value") {
			if s, ok := scalarText(mv.Value); ok && s != "" {
				return s, true
			}
		}
	}
	return "", false
}
