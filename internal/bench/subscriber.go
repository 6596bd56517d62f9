package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"sync"
	"time"
)

// The counting subscriber of `gateway bench` (the hidden subcommand
// bench-subscriber): it runs in a process of its own, so that its CPU time is
// not the bridge's, and must keep up with millions of notifications per
// second, hence a hand-written scanner over the message bytes instead of a
// JSON decoder.
//
// Protocol on stdin/stdout, one line each:
//
//	→ READY                      subscribed (after a flush to the server)
//	← stats                      → one subStats JSON line
//	← window                     → one subStats JSON line with the latency
//	                               percentiles since the previous window, which
//	                               starts a new one
//	EOF on stdin, SIGTERM        → the final subStats JSON line, exit

// subStats are the subscriber's cumulative counters and the latency of the
// current window.
type subStats struct {
	TimeNs int64 `json:"t_ns"`   // the subscriber's clock when taken
	Msgs   int64 `json:"msgs"`   // NATS messages
	Bytes  int64 `json:"bytes"`  // their payload bytes
	Fields int64 `json:"fields"` // DataSet fields seen
	New    int64 `json:"new"`    // fields carrying a new value of their counter: the notifications
	Lost   int64 `json:"lost"`   // counter values skipped (a gap of k is k lost)
	Dup    int64 `json:"dup"`    // fields going back on a value already seen
	// Repeat counts fields carrying their node's last value again: a key
	// frame (or a heartbeat) restating the state, not a notification; they
	// are not measured for latency either (their timestamp is the change's).
	Repeat  int64 `json:"repeat"`
	Seen    int64 `json:"seen"`    // distinct nodes seen
	Unknown int64 `json:"unknown"` // fields that are not one of the -items nodes
	NoTS    int64 `json:"no_ts"`   // fields without a SourceTimestamp (no latency)
	Bad     int64 `json:"bad"`     // messages that did not scan
	// Cut is why the connection to NATS ended while it should run (NATS
	// cuts a subscriber that falls too far behind off as a slow consumer):
	// what it did not receive shows as lost as well.
	Cut string `json:"cut,omitempty"`
	// Backlog is how many received messages waited for the parser when
	// the snapshot was taken, BacklogPeak the most since the previous
	// window, QueuedBytes the bytes of the buffers they hold.
	Backlog     int64 `json:"backlog"`
	BacklogPeak int64 `json:"backlog_peak"`
	QueuedBytes int64 `json:"queued_bytes"`
	// Latency (receive time − SourceTimestamp) of the window: count, p50,
	// p99 and max in milliseconds.
	LatN  int64   `json:"lat_n"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// Stages splits the latency of the same samples by the timestamps the
	// messages carry (fields with all of them only).
	Stages stageStats `json:"stages"`
}

// stageStats is where the latency goes, p50 and p99 of each stage in ms:
//
//	Sample  ServerTimestamp − SourceTimestamp: the generator's tick until
//	        the server sampled it into the item's queue
//	Up      DataSetMessage Timestamp − ServerTimestamp: the server's queue,
//	        publishing interval and Publish response, the wire and the
//	        gateway's decode, until the gateway's writer group began the
//	        message (its Timestamp is that instant)
//	Down    receive − DataSetMessage Timestamp: encoding, the sink's queue,
//	        NATS, until the subscriber's socket reader handed it over
//	Queue   parse − receive, per message: how long a message waited for
//	        this process's parser (not part of the latency)
type stageStats struct {
	SampleP50 float64 `json:"sample_p50_ms"`
	SampleP99 float64 `json:"sample_p99_ms"`
	UpP50     float64 `json:"up_p50_ms"`
	UpP99     float64 `json:"up_p99_ms"`
	DownP50   float64 `json:"down_p50_ms"`
	DownP99   float64 `json:"down_p99_ms"`
	QueueP50  float64 `json:"queue_p50_ms"`
	QueueP99  float64 `json:"queue_p99_ms"`
}

// RunSubscriber is `gateway bench-subscriber`: it subscribes to the bridge's
// messages on NATS and answers the commands of Run on stdin (see the protocol
// above) until stdin ends or ctx is done.
func RunSubscriber(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-subscriber", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("nats", "nats://127.0.0.1:4222", "NATS server `URL`")
	subject := fs.String("subject", "opcua.json.data.>", "NATS `subject` to subscribe to")
	items := fs.Int("items", 1000, "`number` of Load variables the bridge publishes (the first ones)")
	variables := fs.Int("variables", 1000, "variables per Load folder")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *items <= 0 || *variables <= 0 {
		return fmt.Errorf("%w: -items and -variables must be positive", ErrUsage)
	}
	c := newCounter(*items, *variables)

	sub, err := dialNATS(*url, *subject)
	if err != nil {
		return err
	}
	defer sub.close()
	// The latency is taken on receive: the socket's reader stamps each
	// message and hands it to the parser, which may lag behind a burst
	// (every counter of a rate ticks at once) without that wait counting as
	// the bridge's (it shows as sub_queue_ms). The parser ends when stop is
	// closed or the connection ends.
	stop := make(chan struct{})
	var parser sync.WaitGroup
	parser.Add(1)
	go func() {
		defer parser.Done()
		for {
			select {
			case m, ok := <-sub.rx:
				if !ok {
					return
				}
				c.message(m.b, m.at)
				sub.release(m)
			case <-stop:
				return
			}
		}
	}()
	defer parser.Wait()
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	defer halt()
	w := bufio.NewWriter(stdout)
	reply := func(window bool) error {
		st := c.snapshot(window)
		st.Backlog = int64(len(sub.rx))
		st.BacklogPeak = sub.backlogPeak(window)
		st.QueuedBytes = sub.queue.Load()
		if err := sub.ended(); err != nil {
			st.Cut = err.Error()
		}
		b, _ := json.Marshal(&st)
		w.Write(b)
		w.WriteByte('\n')
		return w.Flush()
	}
	fmt.Fprintln(w, "READY")
	if err := w.Flush(); err != nil {
		return err
	}

	// The command reader ends at EOF; a signal ends ctx. Both end with the
	// final line. The reader goroutine is not waited for on a signal: it is
	// blocked in a read of stdin that only the process's exit ends.
	cmds := make(chan string)
	go func() {
		defer close(cmds)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			select {
			case cmds <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			halt()
			parser.Wait()
			return reply(true)
		case cmd, ok := <-cmds:
			if !ok {
				halt()
				parser.Wait()
				return reply(true)
			}
			switch cmd {
			case "stats":
				err = reply(false)
			case "window":
				err = reply(true)
			default:
				fmt.Fprintf(stderr, "bench-subscriber: unknown command %q\n", cmd)
			}
			if err != nil {
				return err
			}
		}
	}
}

// counter counts the notifications of the Load counters. Node i is
// variable i%variables of folder i/variables; its last value is last[i]
// (unseenValue before the first).
type counter struct {
	variables int
	ts        tsMemo
	mu        sync.Mutex
	last      []int64
	st        subStats
	lat       latencyHist
	// Stage histograms (stageStats): sample, up, down, and the parser's
	// queue per message.
	sample, up, down, queue latencyHist
}

const unseenValue = math.MinInt64

func newCounter(items, variables int) *counter {
	c := &counter{variables: variables, last: make([]int64, items)}
	for i := range c.last {
		c.last[i] = unseenValue
	}
	return c
}

// message counts one NATS message received at now (Unix ns).
func (c *counter) message(b []byte, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue.add(time.Now().UnixNano() - now)
	c.st.Msgs++
	c.st.Bytes += int64(len(b))
	s := scanner{b: b, c: c, now: now}
	if !s.top() {
		c.st.Bad++
	}
}

// fieldTimes are the timestamps of one field's value (Unix ns, 0 when
// absent): its SourceTimestamp and ServerTimestamp, and the Timestamp of its
// DataSetMessage.
type fieldTimes struct{ src, srv, dsm int64 }

// field counts one field's value of the node of folder f, variable v,
// received at now.
func (c *counter) field(f, v int, value int64, t fieldTimes, now int64) {
	c.st.Fields++
	i := f*c.variables + v
	if f < 0 || v < 0 || v >= c.variables || i >= len(c.last) {
		c.st.Unknown++
		return
	}
	last := c.last[i]
	switch {
	case last == unseenValue:
		c.st.Seen++
		c.st.New++
	case value == last+1:
		c.st.New++
	case value > last+1:
		c.st.New++
		c.st.Lost += value - last - 1
	case value == last:
		c.st.Repeat++
		return
	default:
		c.st.Dup++
		return
	}
	c.last[i] = value
	if t.src == 0 {
		c.st.NoTS++
		return
	}
	c.lat.add(now - t.src)
	if t.srv != 0 && t.dsm != 0 {
		c.sample.add(t.srv - t.src)
		c.up.add(t.dsm - t.srv)
		c.down.add(now - t.dsm)
	}
}

// snapshot returns the counters; window also ends the latency window.
func (c *counter) snapshot(window bool) subStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.TimeNs = time.Now().UnixNano()
	st.LatN = c.lat.n
	st.P50ms = float64(c.lat.quantile(0.50)) / 1e3
	st.P99ms = float64(c.lat.quantile(0.99)) / 1e3
	st.MaxMs = float64(c.lat.max) / 1e3
	ms := func(h *latencyHist, q float64) float64 { return float64(h.quantile(q)) / 1e3 }
	st.Stages = stageStats{
		SampleP50: ms(&c.sample, 0.5), SampleP99: ms(&c.sample, 0.99),
		UpP50: ms(&c.up, 0.5), UpP99: ms(&c.up, 0.99),
		DownP50: ms(&c.down, 0.5), DownP99: ms(&c.down, 0.99),
		QueueP50: ms(&c.queue, 0.5), QueueP99: ms(&c.queue, 0.99),
	}
	if window {
		c.lat, c.sample, c.up, c.down, c.queue = latencyHist{}, latencyHist{}, latencyHist{}, latencyHist{}, latencyHist{}
	}
	return st
}

// latencyHist is a log-linear histogram of microseconds with 64 sub-buckets
// per power of two (at most 1.6 % error), fixed size, no allocation.
type latencyHist struct {
	n, max  int64
	buckets [64 * 40]int64
}

func latencyBucket(us int64) int {
	if us < 128 {
		return int(max(us, 0))
	}
	shift := bits.Len64(uint64(us)) - 7
	return min(shift*64+int(us>>shift), len(latencyHist{}.buckets)-1)
}

// latencyValue is the middle of bucket i, µs.
func latencyValue(i int) int64 {
	if i < 128 {
		return int64(i)
	}
	shift := i/64 - 1
	m := int64(i - shift*64)
	return m<<shift + (int64(1)<<shift)/2
}

func (h *latencyHist) add(ns int64) {
	us := ns / 1e3
	h.n++
	h.max = max(h.max, us)
	h.buckets[latencyBucket(us)]++
}

// quantile returns the q-quantile in µs (0 when empty).
func (h *latencyHist) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var sum int64
	for i, k := range h.buckets {
		if sum += k; sum >= rank {
			return min(latencyValue(i), h.max)
		}
	}
	return h.max
}

// scanner walks one ua-data message: a NetworkMessage with Messages (an
// array or one object), an array of DataSetMessages, or one DataSetMessage.
// It reads DataSetWriterId, DataSetWriterName and Payload of each
// DataSetMessage and, per field, Value (bare, {"UaType","Value"} or the 1.04
// {"Type","Body"}) and SourceTimestamp; everything else is skipped. It works
// on the bytes as they are (field names and writer names of the bench have
// no escapes), allocates nothing, and stops at the first malformed byte.
type scanner struct {
	b     []byte
	i     int
	depth int
	c     *counter
	now   int64
}

const maxScanDepth = 32

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) eat(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

// str reads a string and returns its raw content (escapes not undone).
func (s *scanner) str() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			s.i = len(s.b)
			return nil, false
		}
		end := s.i + j
		s.i = end + 1
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		bs := 0
		for k := end - 1; k >= start && s.b[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 {
			return s.b[start:end], true
		}
	}
}

// skip skips one value.
func (s *scanner) skip() bool {
	switch s.peek() {
	case '"':
		_, ok := s.str()
		return ok
	case '{':
		return s.object(func([]byte) bool { return s.skip() })
	case '[':
		return s.array(s.skip)
	case 0:
		return false
	}
	// A number or a literal.
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return s.i > start
		}
		s.i++
	}
	return s.i > start
}

// object reads an object, calling member for each key with s positioned at
// its value; member must consume the value.
func (s *scanner) object(member func(key []byte) bool) bool {
	if !s.eat('{') {
		return false
	}
	if s.depth++; s.depth > maxScanDepth {
		return false
	}
	defer func() { s.depth-- }()
	if s.eat('}') {
		return true
	}
	for {
		k, ok := s.str()
		if !ok || !s.eat(':') || !member(k) {
			return false
		}
		if s.eat(',') {
			continue
		}
		return s.eat('}')
	}
}

func (s *scanner) array(elem func() bool) bool {
	if !s.eat('[') {
		return false
	}
	if s.depth++; s.depth > maxScanDepth {
		return false
	}
	defer func() { s.depth-- }()
	if s.eat(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.eat(',') {
			continue
		}
		return s.eat(']')
	}
}

func (s *scanner) top() bool {
	var ok bool
	switch s.peek() {
	case '[':
		ok = s.array(s.dataSetMessage)
	case '{':
		ok = s.dataSetMessage()
	}
	return ok && s.peek() == 0
}

// dataSetMessage reads a DataSetMessage, or a NetworkMessage whose Messages
// are read in turn. The Payload is read after the object, when the writer is
// known whatever the order of the keys.
func (s *scanner) dataSetMessage() bool {
	writerID, writerName := -1, -1
	payload := -1
	var stamp int64
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "Messages":
			if s.peek() == '[' {
				return s.array(s.dataSetMessage)
			}
			return s.dataSetMessage()
		case "DataSetWriterId":
			n, isInt := s.integer()
			writerID = int(n)
			return isInt
		case "DataSetWriterName":
			name, ok := s.str()
			if ok {
				writerName, _ = trailingNumber(name, 'F')
			}
			return ok
		case "Payload":
			if writerID > 0 || writerName >= 0 {
				// The writer is known (the gateway writes it first): read
				// the fields now rather than skip them and come back.
				return s.payload(folderOf(writerName, writerID), stamp)
			}
			payload = s.i
			return s.skip()
		case "Timestamp":
			t, ok := s.str()
			if ok {
				stamp = parseUTCTimestamp(t)
			}
			return ok
		}
		return s.skip()
	})
	if !ok || payload < 0 {
		return ok
	}
	end := s.i
	s.i = payload
	ok = s.payload(folderOf(writerName, writerID), stamp)
	s.i = end
	return ok
}

// folderOf is the Load folder of a writer: by name (Fnnn), else by id
// (nnn+1); -1 when neither is known.
func folderOf(name, id int) int {
	if name < 0 && id > 0 {
		return id - 1
	}
	return name
}

// payload reads the fields of a DataSetMessage of Load folder folder whose
// Timestamp is stamp (Unix ns, 0 when it has none).
func (s *scanner) payload(folder int, stamp int64) bool {
	return s.object(func(name []byte) bool {
		f, v := nodeOfField(name, folder)
		var value int64
		t := fieldTimes{dsm: stamp}
		var ok bool
		valid := true // a missing Value is the default, 0 (Compact)
		if s.peek() == '{' {
			if x, fast := s.fastDataValue(&t); fast {
				s.c.field(f, v, x, t, s.now)
				return true
			}
			ok = s.object(func(k []byte) bool {
				switch string(k) {
				case "Value", "Body":
					value, valid = s.value()
					return valid || s.skip()
				case "SourceTimestamp", "ServerTimestamp":
					b, ok := s.str()
					if ok {
						if k[1] == 'o' {
							t.src = s.c.ts.parse(b)
						} else {
							t.srv = s.c.ts.parse(b)
						}
					}
					return ok
				}
				return s.skip()
			})
		} else {
			value, valid = s.value()
			ok = valid || s.skip()
		}
		if ok {
			if !valid {
				f = -1 // not a counter: counted as unknown
			}
			s.c.field(f, v, value, t, s.now)
		}
		return ok
	})
}

var (
	valuePrefix = []byte(`{"Value":`)
	srcPrefix   = []byte(`"SourceTimestamp":"`)
	srvPrefix   = []byte(`"ServerTimestamp":"`) // as long as srcPrefix
)

// fastDataValue reads a field the way the gateway writes a DataValue of an
// integer counter, {"Value":123,"SourceTimestamp":"…","ServerTimestamp":"…"}
// (no spaces, timestamps optional), into value and t, without the generic
// scanner's calls per member. For anything else it returns false, leaving
// s and t as they were, and the generic scanner reads the field.
func (s *scanner) fastDataValue(t *fieldTimes) (int64, bool) {
	b, i := s.b, s.i
	if !bytes.HasPrefix(b[i:], valuePrefix) {
		return 0, false
	}
	i += len(valuePrefix)
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var n int64
	for i < len(b) && b[i]-'0' <= 9 {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	if i == start || i-start > 18 {
		return 0, false
	}
	if neg {
		n = -n
	}
	src, srv := t.src, t.srv
	for i < len(b) {
		switch b[i] {
		case '}':
			s.i = i + 1
			t.src, t.srv = src, srv
			return n, true
		case ',':
			i++
			var dst *int64
			switch {
			case bytes.HasPrefix(b[i:], srcPrefix):
				dst = &src
			case bytes.HasPrefix(b[i:], srvPrefix):
				dst = &srv
			default:
				return 0, false
			}
			i += len(srcPrefix)
			j := bytes.IndexByte(b[i:], '"')
			if j < 0 {
				return 0, false
			}
			*dst = s.c.ts.parse(b[i : i+j])
			i += j + 1
		default:
			return 0, false
		}
	}
	return 0, false
}

// tsMemo parses timestamps, remembering the Unix time of the last one's
// minute ("2024-05-01T10:15"): the timestamps of a message share it, and
// the rest ("SS.fffffffZ") is quick to read.
type tsMemo struct {
	minute [16]byte
	base   int64 // Unix seconds at the start of minute; 0: none yet
	// The last timestamp and its value: the fields of one tick share it.
	last  [32]byte
	lastN int
	lastV int64
}

// parse is parseUTCTimestamp.
func (m *tsMemo) parse(t []byte) int64 {
	if len(t) == m.lastN && string(t) == string(m.last[:m.lastN]) {
		return m.lastV
	}
	v := m.parseMinute(t)
	if len(t) <= len(m.last) {
		m.lastN = copy(m.last[:], t)
		m.lastV = v
	}
	return v
}

func (m *tsMemo) parseMinute(t []byte) int64 {
	if m.base != 0 && len(t) >= 20 && string(t[:16]) == string(m.minute[:]) && t[len(t)-1] == 'Z' {
		if v, ok := secondsZ(t[16:]); ok {
			return m.base*1e9 + v
		}
	}
	v := parseUTCTimestamp(t)
	if v > 0 && t[len(t)-1] == 'Z' {
		if sec, ok := secondsZ(t[16:]); ok {
			copy(m.minute[:], t[:16])
			m.base = (v - sec) / 1e9
		}
	}
	return v
}

// secondsZ reads ":SS[.fffffffff]Z" into nanoseconds.
func secondsZ(t []byte) (int64, bool) {
	if len(t) < 4 || t[0] != ':' || t[1]-'0' > 9 || t[2]-'0' > 9 {
		return 0, false
	}
	sec := int64(t[1]-'0')*10 + int64(t[2]-'0')
	if sec > 60 {
		return 0, false
	}
	rest := t[3 : len(t)-1]
	var frac int64
	if len(rest) > 0 {
		if rest[0] != '.' || len(rest) < 2 || len(rest) > 10 {
			return 0, false
		}
		scale := int64(1e8)
		for _, c := range rest[1:] {
			if c-'0' > 9 {
				return 0, false
			}
			frac += int64(c-'0') * scale
			scale /= 10
		}
	}
	return sec*1e9 + frac, true
}

// value reads an integer value: a number, a number in a string (Int64), or
// a Variant object {"UaType":6,"Value":5} / {"Type":6,"Body":5}. It leaves s
// where it was and returns false for anything else.
func (s *scanner) value() (int64, bool) {
	switch s.peek() {
	case '"':
		save := s.i
		t, ok := s.str()
		if ok {
			if n, err := strconv.ParseInt(string(t), 10, 64); err == nil {
				return n, true
			}
		}
		s.i = save
		return 0, false
	case '{':
		// A Variant without Value/Body holds its type's default: 0.
		save := s.i
		var n int64
		valid := true
		ok := s.object(func(k []byte) bool {
			if string(k) == "Value" || string(k) == "Body" {
				n, valid = s.value()
				return valid || s.skip()
			}
			return s.skip()
		})
		if ok && valid {
			return n, true
		}
		s.i = save
		return 0, false
	}
	return s.integer()
}

// integer reads a JSON number that is an integer (1, -3, 5.0, 1e3).
func (s *scanner) integer() (int64, bool) {
	s.ws()
	start := s.i
	neg := false
	if s.i < len(s.b) && s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	var n int64
	digits := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + int64(s.b[s.i]-'0')
		s.i++
		digits++
	}
	if digits == 0 || digits > 18 {
		s.i = start
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		// A Double counter: rare in the bench (Int32 is the default), so the
		// slow path is good enough.
		for s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E' ||
			s.b[s.i] == '+' || s.b[s.i] == '-' || (s.b[s.i] >= '0' && s.b[s.i] <= '9')) {
			s.i++
		}
		f, err := strconv.ParseFloat(string(s.b[start:s.i]), 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			s.i = start
			return 0, false
		}
		return int64(f), true
	}
	if neg {
		n = -n
	}
	return n, true
}

// nodeOfField maps a field name to its Load folder and variable: "V00012"
// (the folder is the writer's), "F003.V00012" or a node id ending so. (-1,
// -1) when it is not one.
func nodeOfField(name []byte, writerFolder int) (f, v int) {
	v, j := trailingNumber(name, 'V')
	if v < 0 {
		return -1, -1
	}
	if rest := name[:j]; len(rest) > 1 && rest[len(rest)-1] == '.' {
		if ff, _ := trailingNumber(rest[:len(rest)-1], 'F'); ff >= 0 {
			return ff, v
		}
	}
	return writerFolder, v
}

// trailingNumber returns the decimal number that ends name right after the
// letter prefix ("F003" → 3 for 'F') and the index of the prefix, or -1.
func trailingNumber(name []byte, prefix byte) (n, at int) {
	j := len(name)
	for j > 0 && name[j-1] >= '0' && name[j-1] <= '9' {
		j--
	}
	if j == len(name) || j == 0 || name[j-1] != prefix || len(name)-j > 9 {
		return -1, -1
	}
	for _, d := range name[j:] {
		n = n*10 + int(d-'0')
	}
	return n, j - 1
}

// parseUTCTimestamp parses an ISO 8601 date-time "2024-05-01T10:15:30.1234567Z"
// (fraction optional, Z or ±hh:mm) into Unix nanoseconds; 0 if it is not one.
func parseUTCTimestamp(t []byte) int64 {
	num := func(b []byte) int64 {
		var n int64
		for _, c := range b {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int64(c-'0')
		}
		return n
	}
	if len(t) < 20 || t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':' {
		return 0
	}
	y, mo, d := num(t[0:4]), num(t[5:7]), num(t[8:10])
	h, mi, sec := num(t[11:13]), num(t[14:16]), num(t[17:19])
	if y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 60 {
		return 0
	}
	rest := t[19:]
	var frac int64
	if len(rest) > 0 && rest[0] == '.' {
		j := 1
		scale := int64(1e8)
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			frac += int64(rest[j]-'0') * scale
			scale /= 10
			j++
		}
		if j == 1 {
			return 0
		}
		rest = rest[j:]
	}
	var off int64
	switch {
	case len(rest) == 1 && rest[0] == 'Z':
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, om := num(rest[1:3]), num(rest[4:6])
		if oh < 0 || om < 0 {
			return 0
		}
		off = (oh*60 + om) * 60
		if rest[0] == '-' {
			off = -off
		}
	default:
		return 0
	}
	// Days from the civil date (H. Hinnant's algorithm).
	if mo <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400
	mp := (mo + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	days := era*146097 + doe - 719468
	return ((days*86400+h*3600+mi*60+sec)-off)*1e9 + frac
}
