package uacp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	gouacp "github.com/gopcua/opcua/uacp"

	"github.com/uagate/gateway/uastack/ua"
)

// hexBytes decodes a fixture written as hex with // comments and any spacing.
func hexBytes(t testing.TB, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	return b
}

// message is implemented by the four connection protocol messages.
type message interface {
	AppendBinary([]byte) ([]byte, error)
	UnmarshalBinary([]byte) error
}

var helloFixture = `
	48 45 4c          // MessageType "HEL"
	46                // ChunkType 'F'
	38 00 00 00       // MessageSize 56
	00 00 00 00       // ProtocolVersion 0
	ff ff 00 00       // ReceiveBufferSize 65535
	00 00 01 00       // SendBufferSize 65536
	00 00 00 01       // MaxMessageSize 16 MiB
	00 10 00 00       // MaxChunkCount 4096
	18 00 00 00       // EndpointUrl length 24
	6f 70 63 2e 74 63 70 3a 2f 2f 6c 6f 63 61 6c 68 6f 73 74 3a 34 38 34 30 // "opc.tcp://localhost:4840"
`

var messageCases = []struct {
	name  string
	msg   message
	empty func() message
	hex   string
	// gopcua encodes the body; nil when it has no counterpart
	gopcua func() ([]byte, error)
}{
	{
		name: "Hello",
		msg: &Hello{ProtocolVersion: 0, ReceiveBufferSize: 65535, SendBufferSize: 65536,
			MaxMessageSize: 16 << 20, MaxChunkCount: 4096, EndpointURL: "opc.tcp://localhost:4840"},
		empty: func() message { return new(Hello) },
		hex:   helloFixture,
		gopcua: (&gouacp.Hello{ReceiveBufSize: 65535, SendBufSize: 65536, MaxMessageSize: 16 << 20,
			MaxChunkCount: 4096, EndpointURL: "opc.tcp://localhost:4840"}).Encode,
	},
	{
		name:  "Hello without URL",
		msg:   &Hello{ProtocolVersion: 0, ReceiveBufferSize: 8192, SendBufferSize: 8192},
		empty: func() message { return new(Hello) },
		hex: `
			48 45 4c 46       // "HELF"
			20 00 00 00       // MessageSize 32
			00 00 00 00       // ProtocolVersion 0
			00 20 00 00       // ReceiveBufferSize 8192
			00 20 00 00       // SendBufferSize 8192
			00 00 00 00       // MaxMessageSize 0: no limit
			00 00 00 00       // MaxChunkCount 0: no limit
			ff ff ff ff       // EndpointUrl null
		`,
	},
	{
		name: "Acknowledge",
		msg: &Acknowledge{ProtocolVersion: 0, ReceiveBufferSize: 65535, SendBufferSize: 8192,
			MaxMessageSize: 2 << 20, MaxChunkCount: 512},
		empty: func() message { return new(Acknowledge) },
		hex: `
			41 43 4b 46       // "ACKF"
			1c 00 00 00       // MessageSize 28
			00 00 00 00       // ProtocolVersion 0
			ff ff 00 00       // ReceiveBufferSize 65535
			00 20 00 00       // SendBufferSize 8192
			00 00 20 00       // MaxMessageSize 2 MiB
			00 02 00 00       // MaxChunkCount 512
		`,
		gopcua: (&gouacp.Acknowledge{ReceiveBufSize: 65535, SendBufSize: 8192, MaxMessageSize: 2 << 20,
			MaxChunkCount: 512}).Encode,
	},
	{
		name:  "Error",
		msg:   &Error{Code: ua.StatusBadTcpMessageTooLarge, Reason: "too big"},
		empty: func() message { return new(Error) },
		hex: `
			45 52 52 46       // "ERRF"
			17 00 00 00       // MessageSize 23
			00 00 80 80       // Error 0x80800000 Bad_TcpMessageTooLarge
			07 00 00 00       // Reason length 7
			74 6f 6f 20 62 69 67 // "too big"
		`,
		gopcua: (&gouacp.Error{ErrorCode: 0x80800000, Reason: "too big"}).Encode,
	},
	{
		name:  "Error without reason",
		msg:   &Error{Code: ua.StatusBadTcpServerTooBusy},
		empty: func() message { return new(Error) },
		hex: `
			45 52 52 46       // "ERRF"
			10 00 00 00       // MessageSize 16
			00 00 7d 80       // Error 0x807D0000 Bad_TcpServerTooBusy
			ff ff ff ff       // Reason null
		`,
	},
	{
		name:  "ReverseHello",
		msg:   &ReverseHello{ServerURI: "urn:srv", EndpointURL: "opc.tcp://h:1/p"},
		empty: func() message { return new(ReverseHello) },
		hex: `
			52 48 45 46       // "RHEF"
			26 00 00 00       // MessageSize 38
			07 00 00 00       // ServerUri length 7
			75 72 6e 3a 73 72 76 // "urn:srv"
			0f 00 00 00       // EndpointUrl length 15
			6f 70 63 2e 74 63 70 3a 2f 2f 68 3a 31 2f 70 // "opc.tcp://h:1/p"
		`,
		gopcua: (&gouacp.ReverseHello{ServerURI: "urn:srv", EndpointURL: "opc.tcp://h:1/p"}).Encode,
	},
}

func TestMessagesRoundTrip(t *testing.T) {
	for _, tc := range messageCases {
		t.Run(tc.name, func(t *testing.T) {
			want := hexBytes(t, tc.hex)
			got, err := tc.msg.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoded\n%s\nwant\n%s", hex.Dump(got), hex.Dump(want))
			}
			// Appending keeps what is already there.
			prefixed, _ := tc.msg.AppendBinary([]byte("xy"))
			if !bytes.Equal(prefixed[2:], want) || string(prefixed[:2]) != "xy" {
				t.Fatalf("AppendBinary to a non-empty slice: % x", prefixed)
			}
			dec := tc.empty()
			if err := dec.UnmarshalBinary(want); err != nil {
				t.Fatal(err)
			}
			if again, _ := dec.AppendBinary(nil); !bytes.Equal(again, want) {
				t.Fatalf("decode/encode changed the message: %+v", dec)
			}
			if tc.gopcua != nil {
				body, err := tc.gopcua()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(body, want[HeaderSize:]) {
					t.Fatalf("gopcua body % x, ours % x", body, want[HeaderSize:])
				}
			}
			// Every truncation fails with a typed error, never a panic.
			for n := 0; n < len(want); n++ {
				trunc := append([]byte(nil), want[:n]...)
				if n >= HeaderSize {
					PutHeader(trunc, MessageType(want[0])|MessageType(want[1])<<8|MessageType(want[2])<<16, ChunkFinal, uint32(n))
				}
				err := tc.empty().UnmarshalBinary(trunc)
				if err == nil {
					// A message without URL/reason ends after its fixed fields only
					// when the string is null; all fixtures have their string last.
					t.Fatalf("truncated to %d bytes: no error", n)
				}
				if !errors.Is(err, ua.StatusBadDecodingError) {
					t.Fatalf("truncated to %d bytes: %v does not match Bad_DecodingError", n, err)
				}
			}
		})
	}
}

func TestMessageDecodeErrors(t *testing.T) {
	hello := hexBytes(t, helloFixture)
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), hello...)) }
	long := &Hello{ReceiveBufferSize: 8192, SendBufferSize: 8192, EndpointURL: "opc.tcp://h/" + strings.Repeat("x", MaxURLLength)}
	longMsg := func() []byte {
		b := Header{MessageType: MessageTypeHello, ChunkType: ChunkFinal}.append(nil)
		b = appendUint32s(b, 0, 8192, 8192, 0, 0)
		b = appendString(b, long.EndpointURL)
		return patchSize(b, 0)
	}()
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"wrong type", mutate(func(b []byte) []byte { copy(b, "ACK"); return b }), ErrMessageTypeInvalid},
		{"chunk type C", mutate(func(b []byte) []byte { b[3] = 'C'; return b }), ErrHeaderInvalid},
		{"size above length", mutate(func(b []byte) []byte { b[4]++; return b }), ErrHeaderInvalid},
		{"size below header", mutate(func(b []byte) []byte { b[4], b[5] = 7, 0; return b }), ErrHeaderInvalid},
		{"URL length beyond body", mutate(func(b []byte) []byte { b[28] = 0x7f; return b }), ua.ErrTruncated},
		{"URL too long", longMsg, ErrEndpointURLInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h Hello
			err := h.UnmarshalBinary(tc.b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := long.AppendBinary(nil); !errors.Is(err, ErrEndpointURLInvalid) {
		t.Fatalf("encoding an overlong URL: %v", err)
	}
}

func TestErrorReasonLimits(t *testing.T) {
	// An overlong reason is cut at a character boundary when sent …
	reason := strings.Repeat("é", MaxReasonLength) // 2 bytes each
	b, err := (&Error{Code: ua.StatusBadTcpInternalError, Reason: reason}).AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	var e Error
	if err := e.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if len(e.Reason) != MaxReasonLength || e.Reason != reason[:MaxReasonLength] {
		t.Fatalf("reason cut to %d bytes", len(e.Reason))
	}
	// … and ignored when received.
	raw := Header{MessageType: MessageTypeError, ChunkType: ChunkFinal}.append(nil)
	raw = appendUint32s(raw, uint32(ua.StatusBadTcpInternalError))
	raw = appendString(raw, strings.Repeat("x", MaxReasonLength+1))
	raw = patchSize(raw, 0)
	if err := e.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	if e.Reason != "" || e.Code != ua.StatusBadTcpInternalError {
		t.Fatalf("overlong reason kept: %d bytes, code %v", len(e.Reason), e.Code)
	}
	if !errors.Is(&e, ua.StatusBadTcpInternalError) {
		t.Fatal("*Error does not match its status code")
	}
}

func TestHeader(t *testing.T) {
	b := hexBytes(t, `
		4d 53 47          // "MSG"
		43                // 'C'
		00 00 01 00       // MessageSize 65536
	`)
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h != (Header{MessageType: MessageTypeMessage, ChunkType: ChunkIntermediate, MessageSize: 65536}) {
		t.Fatalf("parsed %+v", h)
	}
	if h.String() != "MSGC 65536 bytes" {
		t.Fatalf("String() = %q", h.String())
	}
	if out, _ := h.AppendBinary(nil); !bytes.Equal(out, b) {
		t.Fatalf("encoded % x", out)
	}
	if _, err := ParseHeader(b[:7]); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short header: %v", err)
	}
	if MessageType(0x00ff01).String() != `"\x01\xff\x00"` {
		t.Fatalf("non-printable type: %s", MessageType(0x00ff01))
	}
	for _, mt := range []MessageType{MessageTypeHello, MessageTypeAcknowledge, MessageTypeError,
		MessageTypeReverseHello, MessageTypeOpen, MessageTypeClose, MessageTypeMessage} {
		if !mt.IsKnown() || len(mt.String()) != 3 {
			t.Errorf("%v", mt)
		}
	}
}

func TestNegotiation(t *testing.T) {
	server := Config{ReceiveBufferSize: 65535, SendBufferSize: 65535, MaxMessageSize: 1 << 20, MaxChunkCount: 100}
	cases := []struct {
		name      string
		hel       Hello
		wantAck   Acknowledge
		wantErr   error
		clientLim Limits
	}{
		{
			name:    "client larger than server",
			hel:     Hello{ReceiveBufferSize: 1 << 20, SendBufferSize: 1 << 20, MaxMessageSize: 0, MaxChunkCount: 0},
			wantAck: Acknowledge{ReceiveBufferSize: 65535, SendBufferSize: 65535, MaxMessageSize: 1 << 20, MaxChunkCount: 100},
			clientLim: Limits{ReceiveBufferSize: 65535, SendBufferSize: 65535,
				MaxSendMessageSize: 1 << 20, MaxSendChunkCount: 100},
		},
		{
			name:    "client smaller than server",
			hel:     Hello{ReceiveBufferSize: 8192, SendBufferSize: 16384, MaxMessageSize: 4 << 20, MaxChunkCount: 64},
			wantAck: Acknowledge{ReceiveBufferSize: 16384, SendBufferSize: 8192, MaxMessageSize: 1 << 20, MaxChunkCount: 100},
			clientLim: Limits{ReceiveBufferSize: 8192, SendBufferSize: 16384, MaxRecvMessageSize: 4 << 20, MaxRecvChunkCount: 64,
				MaxSendMessageSize: 1 << 20, MaxSendChunkCount: 100},
		},
		{
			name:    "asymmetric: 65535/65536 both take the 64 KiB class",
			hel:     Hello{ReceiveBufferSize: 65536, SendBufferSize: 8192},
			wantAck: Acknowledge{ReceiveBufferSize: 8192, SendBufferSize: 65535, MaxMessageSize: 1 << 20, MaxChunkCount: 100},
			clientLim: Limits{ReceiveBufferSize: 65535, SendBufferSize: 8192,
				MaxSendMessageSize: 1 << 20, MaxSendChunkCount: 100},
		},
		{
			name:    "minimum exactly",
			hel:     Hello{ReceiveBufferSize: MinBufferSize, SendBufferSize: MinBufferSize},
			wantAck: Acknowledge{ReceiveBufferSize: MinBufferSize, SendBufferSize: MinBufferSize, MaxMessageSize: 1 << 20, MaxChunkCount: 100},
			clientLim: Limits{ReceiveBufferSize: MinBufferSize, SendBufferSize: MinBufferSize,
				MaxSendMessageSize: 1 << 20, MaxSendChunkCount: 100},
		},
		{name: "client receive buffer too small", hel: Hello{ReceiveBufferSize: 8191, SendBufferSize: 65535}, wantErr: ErrBufferTooSmall},
		{name: "client send buffer too small", hel: Hello{ReceiveBufferSize: 65535, SendBufferSize: 1024}, wantErr: ErrBufferTooSmall},
		{name: "future protocol version", hel: Hello{ProtocolVersion: 7, ReceiveBufferSize: 8192, SendBufferSize: 8192},
			wantAck: Acknowledge{ProtocolVersion: 0, ReceiveBufferSize: 8192, SendBufferSize: 8192, MaxMessageSize: 1 << 20, MaxChunkCount: 100},
			clientLim: Limits{ReceiveBufferSize: 8192, SendBufferSize: 8192,
				MaxSendMessageSize: 1 << 20, MaxSendChunkCount: 100},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ack, slim, err := NegotiateServer(&server, &tc.hel)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !errors.Is(err, ua.StatusBadTcpNotEnoughResources) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ack != tc.wantAck {
				t.Fatalf("ack = %+v\nwant  %+v", ack, tc.wantAck)
			}
			// The rules of Part 6 §7.1.2.4.
			if ack.ReceiveBufferSize > tc.hel.SendBufferSize || ack.SendBufferSize > tc.hel.ReceiveBufferSize ||
				ack.ReceiveBufferSize < MinBufferSize || ack.SendBufferSize < MinBufferSize {
				t.Fatalf("ack %+v breaks the negotiation rules for %+v", ack, tc.hel)
			}
			if slim.ReceiveBufferSize != ack.ReceiveBufferSize || slim.SendBufferSize != ack.SendBufferSize ||
				slim.MaxRecvMessageSize != server.MaxMessageSize || slim.MaxSendMessageSize != tc.hel.MaxMessageSize {
				t.Fatalf("server limits %+v", slim)
			}
			clim, err := NegotiateClient(&tc.hel, &ack)
			if err != nil {
				t.Fatal(err)
			}
			if clim != tc.clientLim {
				t.Fatalf("client limits = %+v\nwant            %+v", clim, tc.clientLim)
			}
			// Each side sends no more than the other receives.
			if clim.SendBufferSize > slim.ReceiveBufferSize || slim.SendBufferSize > clim.ReceiveBufferSize {
				t.Fatalf("client %+v and server %+v do not fit", clim, slim)
			}
		})
	}

	t.Run("client refuses", func(t *testing.T) {
		hel := Hello{ReceiveBufferSize: 65535, SendBufferSize: 65535}
		for _, tc := range []struct {
			ack  Acknowledge
			want error
		}{
			{Acknowledge{ProtocolVersion: 1, ReceiveBufferSize: 8192, SendBufferSize: 8192}, ErrProtocolVersion},
			{Acknowledge{ReceiveBufferSize: 4096, SendBufferSize: 8192}, ErrBufferTooSmall},
			{Acknowledge{ReceiveBufferSize: 8192, SendBufferSize: 0}, ErrBufferTooSmall},
		} {
			if _, err := NegotiateClient(&hel, &tc.ack); !errors.Is(err, tc.want) {
				t.Errorf("%+v: err = %v, want %v", tc.ack, err, tc.want)
			}
		}
		// A server that claims more than asked is held to what was asked.
		lim, err := NegotiateClient(&hel, &Acknowledge{ReceiveBufferSize: 1 << 20, SendBufferSize: 1 << 20})
		if err != nil || lim.ReceiveBufferSize != 65535 || lim.SendBufferSize != 65535 {
			t.Errorf("oversized ack: %+v, %v", lim, err)
		}
	})
}

func TestEndpointAddress(t *testing.T) {
	cases := []struct{ url, want string }{
		{"opc.tcp://localhost:4840/UA/Server", "localhost:4840"},
		{"opc.tcp://127.0.0.1:48010", "127.0.0.1:48010"},
		{"opc.tcp://plc.example", "plc.example:4840"},
		{"OPC.TCP://plc.example/path", "plc.example:4840"},
		{"opc.tcp://[::1]:4841/x", "[::1]:4841"},
		{"opc.tcp://[fe80::1]/x", "[fe80::1]:4840"},
	}
	for _, tc := range cases {
		got, err := EndpointAddress(tc.url)
		if err != nil || got != tc.want {
			t.Errorf("EndpointAddress(%q) = %q, %v; want %q", tc.url, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "http://h:1/", "opc.tcp://", "opc.tcp://:4840/x", "opc.tcp://h:/x", "opc.tcp://h:1%zz",
		"opc.tcp://h/" + strings.Repeat("p", MaxURLLength)} {
		if _, err := EndpointAddress(bad); !errors.Is(err, ErrEndpointURLInvalid) || !errors.Is(err, ua.StatusBadTcpEndpointUrlInvalid) {
			t.Errorf("EndpointAddress(%.40q): err = %v", bad, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{ReceiveBufferSize: 100}, "ReceiveBufferSize"},
		{Config{SendBufferSize: 8191}, "SendBufferSize"},
		{Config{MaxMessageSize: 1 << 30}, "MaxMessageSize"},
		{Config{ReceiveBufferSize: 1 << 30}, "ReceiveBufferSize"},
		{Config{HandshakeTimeout: -1}, "HandshakeTimeout"},
		{Config{MaxPendingHandshakes: -1}, "MaxPendingHandshakes"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "Config."+tc.field) {
			t.Errorf("%+v: err = %v, want one naming %s", tc.cfg, err, tc.field)
		}
	}
	var nilCfg *Config
	if err := nilCfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := nilCfg.withDefaults()
	if err != nil || d.ReceiveBufferSize != DefaultBufferSize || d.Buffers == nil || d.DialContext == nil {
		t.Fatalf("defaults: %+v, %v", d, err)
	}
}
