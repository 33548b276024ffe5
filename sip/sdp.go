package sip

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/pion/sdp/v3"
)

// Codec is one RTP audio format of a media description.
type Codec struct {
	PayloadType uint8
	Name        string // as in rtpmap, e.g. "PCMU", "PCMA", "opus", "telephone-event"
	ClockRate   int    // 8000, 48000
	Channels    int    // 1 unless rtpmap says otherwise (opus/48000/2 → 2)
	Fmtp        string // the a=fmtp value for this payload type, "" if none
}

// The errors ParseOffer and Negotiate wrap. Each says which SIP response
// the caller owes the remote party; the wrapping error says why, for logs.
var (
	// ErrBadSDP is an SDP body that cannot be read: the caller answers 400.
	ErrBadSDP = errors.New("sip: malformed SDP")
	// ErrNoAudio is an SDP with no usable audio stream: the caller answers
	// 488 Not Acceptable Here.
	ErrNoAudio = errors.New("sip: SDP offers no audio")
	// ErrNoCommonCodec is an audio stream with no codec Holdline speaks:
	// the caller answers 488 Not Acceptable Here.
	ErrNoCommonCodec = errors.New("sip: no codec in common")
)

// The media directions of RFC 3264, as they appear in a=sendrecv etc.
const (
	sdpSendRecv = "sendrecv"
	sdpSendOnly = "sendonly"
	sdpRecvOnly = "recvonly"
	sdpInactive = "inactive"
)

// Payload types and names of the formats Holdline speaks.
const (
	sdpPayloadPCMU           = 0   // static, RFC 3551
	sdpPayloadPCMA           = 8   // static, RFC 3551
	sdpPayloadOpus           = 111 // dynamic; the value most stacks use
	sdpPayloadTelephoneEvent = 101 // dynamic; the value most stacks use

	sdpTelephoneEvent = "telephone-event"
	// sdpTelephoneEventFmtp is the DTMF events Holdline takes and sends: the
	// digits 0-9, * and # and the letters A-D (RFC 4733 events 0 to 15)
	// and flash (16).
	sdpTelephoneEventFmtp = "0-16"

	// sdpDefaultPtime is the packet time Holdline offers.
	sdpDefaultPtime = 20 * time.Millisecond
	// sdpMaxPtime is the longest a=ptime taken from a remote SDP; a longer one
	// is nonsense for a phone call and is ignored.
	sdpMaxPtime = time.Second
)

// MediaOffer is what Holdline takes from a remote SDP (offer or answer).
type MediaOffer struct {
	// Addr is where to send RTP: the audio stream's c= address, else the
	// session's. 0.0.0.0 is kept: it is the old (RFC 2543) way to say hold.
	Addr netip.Addr
	// Port is the port of the first audio m= line whose port is not 0.
	Port int
	// Codecs are that m= line's formats in the offerer's order, without
	// telephone-event. Static payload types are known without a=rtpmap
	// (0 is PCMU/8000, 8 is PCMA/8000, ...); a dynamic one without
	// a=rtpmap is listed with an empty Name, so it can be logged but is
	// never negotiated.
	Codecs []Codec
	// TelephoneEvent is the RFC 4733 DTMF format (telephone-event/8000)
	// if the stream offers it, else nil.
	TelephoneEvent *Codec
	// Direction is "sendrecv" (the default), "sendonly", "recvonly" or
	// "inactive". A media-level attribute overrides a session-level one.
	Direction string
	// Ptime is the a=ptime packet time (media-level, else session-level),
	// 0 if absent or not a sensible number of milliseconds.
	Ptime time.Duration
	// SAVP is an m= line of profile RTP/SAVP: SRTP is required.
	SAVP bool
	// Crypto are the stream's SDES keys (a=crypto, RFC 4568) that Holdline
	// can use, in the offerer's order: lines of an unknown suite or that
	// do not read are left out, the first of them saying why in
	// cryptoErr. They print with their keys redacted.
	Crypto    []Crypto
	cryptoErr error
}

// ParseOffer reads the audio stream out of a remote SDP body, an offer or
// an answer. It accepts CRLF or LF line endings and a missing final line
// ending, and never panics.
//
// A body that is empty or is not SDP, or an audio stream without a usable
// c= address or with a bad port or payload type, gives an error wrapping
// ErrBadSDP. An SDP whose audio m= lines are all missing or all have port 0
// gives ErrNoAudio. Streams other than audio (video, T.38 image, ...) are
// skipped without being checked, so their oddities never fail a call.
func ParseOffer(body []byte) (MediaOffer, error) {
	text, others := sdpAudioOnly(body)
	if strings.TrimSpace(text) == "" && len(others) == 0 {
		return MediaOffer{}, fmt.Errorf("%w: empty body", ErrBadSDP)
	}
	var sd sdp.SessionDescription
	if err := sd.UnmarshalString(text); err != nil {
		return MediaOffer{}, fmt.Errorf("%w: %w", ErrBadSDP, err)
	}
	// The SDP parser stops quietly at the end of the text, wherever that
	// is: check the lines RFC 4566 requires are all there.
	if sd.Origin.NetworkType == "" {
		return MediaOffer{}, fmt.Errorf("%w: no o= line (body truncated or not SDP)", ErrBadSDP)
	}
	if len(sd.TimeDescriptions) == 0 {
		return MediaOffer{}, fmt.Errorf("%w: no t= line (body truncated or not SDP)", ErrBadSDP)
	}

	var md *sdp.MediaDescription
	audio := 0
	for _, m := range sd.MediaDescriptions {
		audio++
		if m.MediaName.Port.Value != 0 {
			md = m
			break
		}
	}
	switch {
	case audio == 0 && len(others) == 0:
		return MediaOffer{}, fmt.Errorf("%w: no m= line at all", ErrNoAudio)
	case audio == 0:
		return MediaOffer{}, fmt.Errorf("%w: no m=audio line (offered: %s)", ErrNoAudio, strings.Join(others, ", "))
	case md == nil:
		return MediaOffer{}, fmt.Errorf("%w: every m=audio line has port 0 (stream disabled)", ErrNoAudio)
	}

	var o MediaOffer
	o.Port = md.MediaName.Port.Value

	c := md.ConnectionInformation
	if c == nil {
		c = sd.ConnectionInformation
	}
	if c == nil {
		return MediaOffer{}, fmt.Errorf("%w: no c= line for the audio stream, neither in it nor at session level", ErrBadSDP)
	}
	addr, err := sdpConnAddr(c)
	if err != nil {
		return MediaOffer{}, err
	}
	o.Addr = addr

	if err := sdpFormats(md, &o); err != nil {
		return MediaOffer{}, err
	}
	o.SAVP = strings.Join(md.MediaName.Protos, "/") == "RTP/SAVP"
	o.Crypto, o.cryptoErr = sdpCrypto(md.Attributes)

	o.Direction = sdpSendRecv
	if d, ok := sdpDirection(sd.Attributes); ok {
		o.Direction = d
	}
	if d, ok := sdpDirection(md.Attributes); ok {
		o.Direction = d
	}

	if v, ok := md.Attribute("ptime"); ok {
		o.Ptime = sdpPtime(v)
	} else if v, ok := sd.Attribute("ptime"); ok {
		o.Ptime = sdpPtime(v)
	}
	return o, nil
}

// sdpAudioOnly returns body with CRLF line endings and without the media
// sections other than audio, and the media names of those it removed.
// Holdline does not use them, and the SDP parser refuses some that are
// common on telephone networks (m=image for T.38 fax, proto udptl); an
// offer of fax alone must be answered 488, not 400.
func sdpAudioOnly(body []byte) (text string, others []string) {
	var b strings.Builder
	b.Grow(len(body) + len(body)/16 + 2)
	skip := false
	for line := range strings.SplitSeq(string(body), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.HasPrefix(line, "m=") {
			media, _, _ := strings.Cut(line[2:], " ")
			skip = media != "audio"
			if skip {
				if media == "" {
					media = "(none)"
				}
				others = append(others, media)
			}
		}
		if skip || line == "" {
			continue
		}
		b.WriteString(line)
		b.WriteString("\r\n")
	}
	return b.String(), others
}

// sdpConnAddr returns the address of a c= line, which must be an IP
// literal of the line's address type.
func sdpConnAddr(c *sdp.ConnectionInformation) (netip.Addr, error) {
	if c.Address == nil || c.Address.Address == "" {
		return netip.Addr{}, fmt.Errorf("%w: c= line %q has no address", ErrBadSDP, c.String())
	}
	// A multicast address may carry /ttl and /count; the address is before.
	s, _, _ := strings.Cut(c.Address.Address, "/")
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: c= address %q is not an IP address (host names are not resolved): %w", ErrBadSDP, s, err)
	}
	switch {
	case addr.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%w: c= address %q has a zone, meaningless to a remote party", ErrBadSDP, s)
	case c.AddressType == "IP4" && !addr.Is4():
		return netip.Addr{}, fmt.Errorf("%w: c= line says IP4 but %q is not an IPv4 address", ErrBadSDP, s)
	case c.AddressType == "IP6" && !addr.Is6():
		return netip.Addr{}, fmt.Errorf("%w: c= line says IP6 but %q is not an IPv6 address", ErrBadSDP, s)
	}
	return addr, nil
}

// sdpFormats fills o.Codecs and o.TelephoneEvent from the formats of md,
// their a=rtpmap and their a=fmtp.
func sdpFormats(md *sdp.MediaDescription, o *MediaOffer) error {
	if len(md.MediaName.Formats) == 0 {
		return fmt.Errorf("%w: m=audio line lists no formats", ErrBadSDP)
	}
	seen := make(map[uint8]bool, len(md.MediaName.Formats))
	for _, f := range md.MediaName.Formats {
		pt, err := strconv.ParseUint(f, 10, 7)
		if err != nil {
			return fmt.Errorf("%w: m=audio format %q is not an RTP payload type (0-127)", ErrBadSDP, f)
		}
		c := Codec{PayloadType: uint8(pt), Channels: 1}
		if seen[c.PayloadType] {
			continue
		}
		seen[c.PayloadType] = true

		if v, ok := sdpPayloadAttr(md.Attributes, "rtpmap", c.PayloadType); ok {
			if err := sdpParseRtpmap(v, &c); err != nil {
				return err
			}
		} else {
			c.Name, c.ClockRate = sdpStaticPayload(c.PayloadType)
		}
		c.Fmtp, _ = sdpPayloadAttr(md.Attributes, "fmtp", c.PayloadType)

		if strings.EqualFold(c.Name, sdpTelephoneEvent) {
			// Only the 8 kHz clock goes with the telephone codecs.
			if c.ClockRate == 8000 && o.TelephoneEvent == nil {
				te := c
				o.TelephoneEvent = &te
			}
			continue
		}
		o.Codecs = append(o.Codecs, c)
	}
	return nil
}

// sdpPayloadAttr returns the value, after the payload type, of the first
// a=<key>:<pt> <value> attribute for pt.
func sdpPayloadAttr(attrs []sdp.Attribute, key string, pt uint8) (string, bool) {
	for _, a := range attrs {
		if a.Key != key {
			continue
		}
		num, rest, _ := strings.Cut(strings.TrimSpace(a.Value), " ")
		n, err := strconv.ParseUint(num, 10, 8)
		if err != nil || uint8(n) != pt {
			continue
		}
		return strings.TrimSpace(rest), true
	}
	return "", false
}

// sdpParseRtpmap reads <encoding name>/<clock rate>[/<channels>] into c.
func sdpParseRtpmap(v string, c *Codec) error {
	parts := strings.Split(v, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
		return fmt.Errorf("%w: a=rtpmap:%d %q is not <name>/<clock rate>[/<channels>]", ErrBadSDP, c.PayloadType, v)
	}
	rate, err := strconv.Atoi(parts[1])
	if err != nil || rate <= 0 {
		return fmt.Errorf("%w: a=rtpmap:%d %q has a bad clock rate", ErrBadSDP, c.PayloadType, v)
	}
	c.Name, c.ClockRate = parts[0], rate
	if len(parts) == 3 {
		ch, err := strconv.Atoi(parts[2])
		if err != nil || ch <= 0 || ch > 255 {
			return fmt.Errorf("%w: a=rtpmap:%d %q has a bad channel count", ErrBadSDP, c.PayloadType, v)
		}
		c.Channels = ch
	}
	return nil
}

// sdpStaticPayload returns the encoding name and clock rate RFC 3551 assigns
// to an audio payload type, so an offer may omit their a=rtpmap; "" and 0
// for a dynamic or unassigned one.
func sdpStaticPayload(pt uint8) (string, int) {
	switch pt {
	case 0:
		return "PCMU", 8000
	case 3:
		return "GSM", 8000
	case 4:
		return "G723", 8000
	case 5:
		return "DVI4", 8000
	case 6:
		return "DVI4", 16000
	case 7:
		return "LPC", 8000
	case 8:
		return "PCMA", 8000
	case 9:
		return "G722", 8000
	case 10, 11:
		return "L16", 44100
	case 12:
		return "QCELP", 8000
	case 13:
		return "CN", 8000
	case 14:
		return "MPA", 90000
	case 15:
		return "G728", 8000
	case 16:
		return "DVI4", 11025
	case 17:
		return "DVI4", 22050
	case 18:
		return "G729", 8000
	}
	return "", 0
}

// sdpDirection returns the first direction attribute among attrs.
func sdpDirection(attrs []sdp.Attribute) (string, bool) {
	for _, a := range attrs {
		switch a.Key {
		case sdpSendRecv, sdpSendOnly, sdpRecvOnly, sdpInactive:
			return a.Key, true
		}
	}
	return "", false
}

// sdpPtime reads an a=ptime value in milliseconds (some stacks send a
// fraction, "20.0"). Packet time is advice, so a value that makes no sense
// reads as absent rather than failing the call.
func sdpPtime(v string) time.Duration {
	ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(ms > 0 && ms <= float64(sdpMaxPtime/time.Millisecond)) {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// Negotiate chooses the codec for a call from an offer. Among the offered
// codecs whose name is in prefer (compared case-insensitively) and that
// Holdline speaks at their clock rate (PCMU and PCMA at 8000 Hz, opus at
// 48000 Hz) it takes the offerer's first: RFC 3264 lets the offerer rank
// its formats, and honouring that spares the far end a transcode. prefer
// thus only says what Holdline may use, not in which order.
//
// It returns ErrNoCommonCodec, wrapped with what was offered, if there is
// none.
func Negotiate(o MediaOffer, prefer []string) (Codec, error) {
	for _, c := range o.Codecs {
		if !sdpSupported(c) {
			continue
		}
		for _, name := range prefer {
			if strings.EqualFold(c.Name, name) {
				return c, nil
			}
		}
	}
	offered := make([]string, 0, len(o.Codecs))
	for _, c := range o.Codecs {
		offered = append(offered, sdpDescribe(c))
	}
	if len(offered) == 0 {
		offered = append(offered, "nothing but telephone-event")
	}
	return Codec{}, fmt.Errorf("%w: offered %s; Holdline takes %s",
		ErrNoCommonCodec, strings.Join(offered, ", "), strings.Join(prefer, ", "))
}

// sdpSupported reports whether Holdline can encode and decode c.
func sdpSupported(c Codec) bool {
	switch {
	case strings.EqualFold(c.Name, "PCMU"), strings.EqualFold(c.Name, "PCMA"):
		return c.ClockRate == 8000
	case strings.EqualFold(c.Name, "opus"):
		return c.ClockRate == 48000
	}
	return false
}

// sdpDescribe names c for an error message: "G729/8000 (18)".
func sdpDescribe(c Codec) string {
	if c.Name == "" {
		return fmt.Sprintf("payload type %d without rtpmap", c.PayloadType)
	}
	return fmt.Sprintf("%s/%d (%d)", c.Name, c.ClockRate, c.PayloadType)
}

// AnswerDirection is the direction to answer o with: its mirror image, so
// that sendonly gets recvonly, recvonly gets sendonly, and inactive and
// sendrecv get themselves.
//
// An offer with the address 0.0.0.0 (or ::) is the old way of putting a call
// on hold (RFC 3264 section 8.4): nothing may be sent to it. So sendrecv
// then gets recvonly, and recvonly gets inactive.
func AnswerDirection(o MediaOffer) string {
	hold := o.Addr.IsValid() && o.Addr.IsUnspecified()
	switch o.Direction {
	case sdpSendOnly:
		return sdpRecvOnly
	case sdpInactive:
		return sdpInactive
	case sdpRecvOnly:
		if hold {
			return sdpInactive
		}
		return sdpSendOnly
	}
	if hold {
		return sdpRecvOnly
	}
	return sdpSendRecv
}

// Answer is the SDP Holdline sends back to an offer.
type Answer struct {
	Addr           netip.Addr    // our RTP address
	Port           int           // our RTP port
	Codec          Codec         // the one chosen, by Negotiate; its Fmtp is written as it is
	TelephoneEvent *Codec        // the offer's telephone-event (its payload type is echoed), else nil
	Direction      string        // from AnswerDirection
	SessionID      uint64        // stays the same for the whole call
	Version        uint64        // bumped for each re-INVITE answer
	Ptime          time.Duration // 20ms normally; 0 leaves a=ptime out
	// Crypto is our SDES key for an SRTP call (the offer's tag and
	// suite), nil for plain RTP; SAVP then says RTP/SAVP rather than
	// RTP/AVP, as the offer did.
	Crypto *Crypto
	SAVP   bool
}

// Marshal returns the answer as an SDP body with CRLF line endings:
//
//	v=0
//	o=holdline <SessionID> <Version> IN IP4 <Addr>
//	s=Holdline
//	c=IN IP4 <Addr>
//	t=0 0
//	m=audio <Port> RTP/AVP <pt> [<telephone-event pt>]
//	a=rtpmap:<pt> <name>/<clock rate>[/<channels>]
//	a=fmtp:<pt> <fmtp>                          (if the codec has one)
//	a=rtpmap:<te pt> telephone-event/8000       (if TelephoneEvent is set)
//	a=fmtp:<te pt> 0-16
//	a=ptime:20
//	a=sendrecv
//	a=crypto:<tag> <suite> inline:<key>         (if Crypto is set; RTP/SAVP if SAVP)
//
// An IPv6 Addr is written IN IP6; an invalid (zero) Addr is written
// 0.0.0.0, and an empty or unknown Direction as sendrecv. Opus is always
// written opus/48000/2, as RFC 7587 requires.
func (a Answer) Marshal() []byte {
	var te *Codec
	if a.TelephoneEvent != nil && a.TelephoneEvent.PayloadType != a.Codec.PayloadType {
		te = &Codec{
			PayloadType: a.TelephoneEvent.PayloadType,
			Name:        sdpTelephoneEvent,
			ClockRate:   8000,
			Channels:    1,
			Fmtp:        sdpTelephoneEventFmtp,
		}
	}
	sd := sdpSession(a.Addr, a.Port, a.SessionID, a.Version, []Codec{a.Codec}, te, a.Ptime, a.Direction)
	if a.Crypto != nil {
		sdesSecure(sd.MediaDescriptions[0], a.SAVP, *a.Crypto)
	}
	return sdpBytes(sd)
}

// NewOffer is the SDP offer for an outbound call from addr:port: PCMU (0),
// PCMA (8), opus (111, opus/48000/2) and telephone-event (101, 0-16), in
// that order, sendrecv, ptime 20. Telephone networks mostly take the first
// two, so they lead.
func NewOffer(addr netip.Addr, port int, sessionID, version uint64) []byte {
	return sdpBytes(newOfferSession(addr, port, sessionID, version))
}

// newOfferSession is NewOffer before it is written out.
func newOfferSession(addr netip.Addr, port int, sessionID, version uint64) *sdp.SessionDescription {
	codecs := []Codec{
		{PayloadType: sdpPayloadPCMU, Name: "PCMU", ClockRate: 8000, Channels: 1},
		{PayloadType: sdpPayloadPCMA, Name: "PCMA", ClockRate: 8000, Channels: 1},
		{PayloadType: sdpPayloadOpus, Name: "opus", ClockRate: 48000, Channels: 2},
	}
	te := &Codec{PayloadType: sdpPayloadTelephoneEvent, Name: sdpTelephoneEvent, ClockRate: 8000, Channels: 1, Fmtp: sdpTelephoneEventFmtp}
	return sdpSession(addr, port, sessionID, version, codecs, te, sdpDefaultPtime, sdpSendRecv)
}

// sdpSession is a one-stream audio SDP.
func sdpSession(addr netip.Addr, port int, sessionID, version uint64, codecs []Codec, te *Codec, ptime time.Duration, dir string) *sdp.SessionDescription {
	if !addr.IsValid() {
		addr = netip.IPv4Unspecified()
	}
	addr = addr.WithZone("")
	addrType := "IP4"
	if !addr.Is4() {
		addrType = "IP6"
	}
	switch dir {
	case sdpSendRecv, sdpSendOnly, sdpRecvOnly, sdpInactive:
	default:
		dir = sdpSendRecv
	}
	if te != nil {
		codecs = append(codecs[:len(codecs):len(codecs)], *te)
	}

	m := &sdp.MediaDescription{
		MediaName: sdp.MediaName{
			Media:  "audio",
			Port:   sdp.RangedPort{Value: port},
			Protos: []string{"RTP", "AVP"},
		},
	}
	for _, c := range codecs {
		pt := strconv.Itoa(int(c.PayloadType))
		m.MediaName.Formats = append(m.MediaName.Formats, pt)
		m.Attributes = append(m.Attributes, sdp.NewAttribute("rtpmap", pt+" "+sdpRtpmap(c)))
		if f := sdpOneLine(c.Fmtp); f != "" {
			m.Attributes = append(m.Attributes, sdp.NewAttribute("fmtp", pt+" "+f))
		}
	}
	if ms := ptime.Milliseconds(); ms > 0 {
		m.Attributes = append(m.Attributes, sdp.NewAttribute("ptime", strconv.FormatInt(ms, 10)))
	}
	m.Attributes = append(m.Attributes, sdp.NewPropertyAttribute(dir))

	return &sdp.SessionDescription{
		Origin: sdp.Origin{
			Username:       "holdline",
			SessionID:      sessionID,
			SessionVersion: version,
			NetworkType:    "IN",
			AddressType:    addrType,
			UnicastAddress: addr.String(),
		},
		SessionName: "Holdline",
		ConnectionInformation: &sdp.ConnectionInformation{
			NetworkType: "IN",
			AddressType: addrType,
			Address:     &sdp.Address{Address: addr.String()},
		},
		TimeDescriptions:  []sdp.TimeDescription{{}},
		MediaDescriptions: []*sdp.MediaDescription{m},
	}
}

// sdpBytes writes sd out with CRLF line endings.
func sdpBytes(sd *sdp.SessionDescription) []byte {
	// The library's Marshal only appends to a buffer; its error is always nil.
	b, err := sd.Marshal()
	if err != nil {
		return nil
	}
	return b
}

// sdpRtpmap is the a=rtpmap value of c after the payload type.
func sdpRtpmap(c Codec) string {
	name, ch := sdpOneLine(c.Name), c.Channels
	if strings.EqualFold(name, "opus") {
		ch = 2 // RFC 7587: always opus/48000/2, whatever is sent
	}
	s := name + "/" + strconv.Itoa(c.ClockRate)
	if ch > 1 {
		s += "/" + strconv.Itoa(ch)
	}
	return s
}

// sdpOneLine removes line breaks from s, so that a value taken from a remote
// SDP cannot add lines to the one Holdline writes.
func sdpOneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.TrimSpace(strings.NewReplacer("\r", "", "\n", "").Replace(s))
}
