// ondatra's OTG tests against gapless serve, the way featureprofiles drives an ATE: the
// config pushed over OTG gRPC (gosnappi), every result read over gNMI (ondatra's OTG client
// has no metrics call). Run by python/tests/test_ondatra.py, which makes the two veths,
// starts the server and writes the binding; see tests/ondatra/README.md.
package ondatra_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/open-traffic-generator/snappi/gosnappi"
	"github.com/openconfig/ondatra"
	"github.com/openconfig/ondatra/gnmi"
	"github.com/openconfig/ondatra/gnmi/otg"
	otgapi "github.com/openconfig/ondatra/otg"
	"github.com/openconfig/ygnmi/ygnmi"
)

const (
	mac1, mac2 = "02:67:6c:0b:00:01", "02:67:6c:0b:00:02"
	ip1, ip2   = "1.1.1.1", "1.1.1.2"
)

func TestMain(m *testing.M) {
	ondatra.RunTests(m, newBinding)
}

// devices is port1 and port2 with d1 and d2 on them, each the other's gateway.
func devices(t *testing.T) (gosnappi.Config, []gosnappi.Device) {
	t.Helper()
	cfg := gosnappi.NewConfig()
	cfg.Ports().Add().SetName("port1")
	cfg.Ports().Add().SetName("port2")
	var out []gosnappi.Device
	for k, spec := range []struct{ port, mac, ip, gw string }{{"port1", mac1, ip1, ip2}, {"port2", mac2, ip2, ip1}} {
		n := []string{"d1", "d2"}[k]
		d := cfg.Devices().Add().SetName(n)
		eth := d.Ethernets().Add().SetName(n + ".eth").SetMac(spec.mac)
		eth.Connection().SetPortName(spec.port)
		eth.Ipv4Addresses().Add().SetName(n + ".ip4").SetAddress(spec.ip).SetGateway(spec.gw).SetPrefix(24)
		out = append(out, d)
	}
	return cfg, out
}

// waitForARP waits until every Ethernet of `cfg` has an IPv4 neighbour with a link-layer
// address, as featureprofiles' otgutils.WaitForARP does (a Watch on the interface's
// neighbours, keyed by the Ethernet's name).
func waitForARP(t *testing.T, ate *otgapi.OTG, cfg gosnappi.Config) {
	t.Helper()
	for _, d := range cfg.Devices().Items() {
		for _, eth := range d.Ethernets().Items() {
			_, ok := gnmi.WatchAll(t, ate, gnmi.OTG().Interface(eth.Name()).Ipv4NeighborAny().LinkLayerAddress().State(),
				time.Minute, func(v *ygnmi.Value[string]) bool { return v.IsPresent() }).Await(t)
			if !ok {
				t.Fatalf("expected %s's IPv4 neighbour resolved within a minute", eth.Name())
			}
		}
	}
}

func TestPushConfigStartProtocolsAndWaitForARP(t *testing.T) {
	ate := ondatra.ATE(t, "ate").OTG()
	cfg, _ := devices(t)
	ate.PushConfig(t, cfg)
	ate.StartProtocols(t)
	waitForARP(t, ate, cfg)
	got := gnmi.Get(t, ate, gnmi.OTG().Interface("d1.eth").Ipv4Neighbor(ip2).LinkLayerAddress().State())
	if got != mac2 {
		t.Errorf("expected d1.eth's neighbour %s at %s; got %q", ip2, mac2, got)
	}
}

func TestAFlowsCountersWatchedAndReadAndItsCapture(t *testing.T) {
	ate := ondatra.ATE(t, "ate").OTG()
	cfg, _ := devices(t)
	f := cfg.Flows().Add().SetName("f1")
	f.TxRx().Device().SetTxNames([]string{"d1.ip4"}).SetRxNames([]string{"d2.ip4"})
	f.Size().SetFixed(128)
	f.Rate().SetPps(2000)
	f.Duration().FixedPackets().SetPackets(2000)
	f.Metrics().SetEnable(true)
	f.Packet().Add().Ethernet()
	f.Packet().Add().Ipv4()
	f.Packet().Add().Udp()
	cfg.Captures().Add().SetName("c2").SetPortNames([]string{"port2"}).SetFormat(gosnappi.CaptureFormat.PCAP)
	ate.PushConfig(t, cfg)
	ate.StartProtocols(t)
	waitForARP(t, ate, cfg)
	cs := gosnappi.NewControlState()
	cs.Port().Capture().SetPortNames([]string{"port2"}).SetState(gosnappi.StatePortCaptureState.START)
	ate.SetControlState(t, cs)
	ate.StartTraffic(t)
	// A Watch on in-pkts sees it grow to every frame (TARGET_DEFINED: sampled each second).
	var seen []uint64
	_, ok := gnmi.Watch(t, ate, gnmi.OTG().Flow("f1").Counters().InPkts().State(), time.Minute,
		func(v *ygnmi.Value[uint64]) bool {
			n, present := v.Val()
			if present {
				seen = append(seen, n)
			}
			return present && n == 2000
		}).Await(t)
	if !ok || len(seen) < 2 {
		t.Fatalf("expected in-pkts watched rising to 2000; got %v", seen)
	}
	gnmi.Watch(t, ate, gnmi.OTG().Flow("f1").Transmit().State(), time.Minute,
		func(v *ygnmi.Value[bool]) bool { on, ok := v.Val(); return ok && !on }).Await(t)
	// As featureprofiles' otgutils.LogFlowMetrics reads it: the flow's whole state.
	fm := gnmi.Get(t, ate, gnmi.OTG().Flow("f1").State())
	if fm.GetCounters().GetOutPkts() != 2000 || fm.GetCounters().GetInPkts() != 2000 || fm.GetCounters().GetInOctets() != 256000 {
		t.Errorf("expected 2000 frames (256000 octets) out and in; got out %d in %d (%d octets)",
			fm.GetCounters().GetOutPkts(), fm.GetCounters().GetInPkts(), fm.GetCounters().GetInOctets())
	}
	if loss := fm.GetLossPct(); len(loss) != 4 || binary.BigEndian.Uint32(loss) != 0 {
		t.Errorf("expected loss-pct 0.0 as a 4-byte ieeefloat32; got %v", loss)
	}
	if in := gnmi.Get(t, ate, gnmi.OTG().Port("port2").Counters().InFrames().State()); in < 2000 {
		t.Errorf("expected port2 to count the flow's 2000 frames in; got %d", in)
	}
	cs.Port().Capture().SetState(gosnappi.StatePortCaptureState.STOP)
	ate.SetControlState(t, cs)
	pcap := ate.GetCapture(t, gosnappi.NewCaptureRequest().SetPortName("port2"))
	if n := framesOfLength(t, pcap, 128); n != 2000 {
		t.Errorf("expected the capture to hold the flow's 2000 frames of 128 bytes (FCS included); got %d", n)
	}
}

// TestTaggedMetricsCountEachDscpAsItArrives: a flow whose DSCP takes three values, its
// DSCP and ECN bits tagged on the received frame (egress_packet), read as featureprofiles'
// QoS tests read it: every tagged metric with its two tags and in-pkts, and the tags alone.
func TestTaggedMetricsCountEachDscpAsItArrives(t *testing.T) {
	ate := ondatra.ATE(t, "ate").OTG()
	cfg, _ := devices(t)
	f := cfg.Flows().Add().SetName("marked")
	f.TxRx().Device().SetTxNames([]string{"d1.ip4"}).SetRxNames([]string{"d2.ip4"})
	f.Size().SetFixed(128)
	f.Rate().SetPps(3000)
	f.Duration().FixedPackets().SetPackets(900)
	f.Metrics().SetEnable(true)
	f.Packet().Add().Ethernet()
	f.Packet().Add().Ipv4().Priority().Dscp().Phb().SetValues([]uint32{10, 46, 0})
	f.Packet().Add().Udp()
	f.EgressPacket().Add().Ethernet()
	raw := f.EgressPacket().Add().Ipv4().Priority().Raw()
	raw.MetricTags().Add().SetName("dscp").SetOffset(0).SetLength(6)
	raw.MetricTags().Add().SetName("ecn").SetOffset(6).SetLength(2)
	ate.PushConfig(t, cfg)
	ate.StartProtocols(t)
	waitForARP(t, ate, cfg)
	ate.StartTraffic(t)
	gnmi.Watch(t, ate, gnmi.OTG().Flow("marked").Transmit().State(), time.Minute,
		func(v *ygnmi.Value[bool]) bool { on, ok := v.Val(); return ok && !on }).Await(t)
	ets := gnmi.GetAll(t, ate, gnmi.OTG().Flow("marked").TaggedMetricAny().State())
	got := map[string]uint64{}
	for _, et := range ets {
		if len(et.Tags) != 2 {
			t.Fatalf("expected two tags (dscp, ecn) on each tagged metric; got %d in %v", len(et.Tags), et.GetNameValuePairs())
		}
		var dscp, ecn string
		for _, tag := range et.Tags {
			switch tag.GetTagName() {
			case "dscp":
				dscp = tag.GetTagValue().GetValueAsHex()
			case "ecn":
				ecn = tag.GetTagValue().GetValueAsHex()
			}
		}
		if ecn != "0x0" {
			t.Errorf("expected ECN 0x0 on %s; got %q", et.GetNameValuePairs(), ecn)
		}
		got[dscp] = et.GetCounters().GetInPkts()
	}
	want := map[string]uint64{"0x0a": 300, "0x2e": 300, "0x00": 300}
	if len(got) != len(want) || got["0x0a"] != 300 || got["0x2e"] != 300 || got["0x00"] != 300 {
		t.Errorf("expected in-pkts by DSCP %v; got %v", want, got)
	}
	// The tags alone, as EgressTracking tests read them (one tag a metric there; here the
	// last of the two arrives, each metric's own).
	tags := gnmi.GetAll(t, ate, gnmi.OTG().Flow("marked").TaggedMetricAny().TagsAny().State())
	if len(tags) != 3 {
		t.Errorf("expected the tags of 3 tagged metrics; got %d", len(tags))
	}
	for _, tag := range tags {
		if !strings.HasPrefix(tag.GetTagValue().GetValueAsHex(), "0x") {
			t.Errorf("expected a hex tag value; got %q of %q", tag.GetTagValue().GetValueAsHex(), tag.GetTagName())
		}
	}
}

// framesOfLength counts a pcap's records of `n` bytes on the wire.
func framesOfLength(t *testing.T, pcap []byte, n uint32) int {
	t.Helper()
	if len(pcap) < 24 || binary.LittleEndian.Uint32(pcap) != 0xa1b2c3d4 && binary.LittleEndian.Uint32(pcap) != 0xa1b23c4d {
		t.Fatalf("expected a little-endian pcap; got %d bytes starting %x", len(pcap), pcap[:min(len(pcap), 8)])
	}
	count := 0
	for off := 24; off+16 <= len(pcap); {
		incl, orig := binary.LittleEndian.Uint32(pcap[off+8:]), binary.LittleEndian.Uint32(pcap[off+12:])
		if orig == n {
			count++
		}
		off += 16 + int(incl)
	}
	return count
}

// routers gives d1 and d2 eBGP peers (AS 65001, 65002) and IS-IS (level 2, point to point).
func routers(t *testing.T) gosnappi.Config {
	cfg, devs := devices(t)
	for k, d := range devs {
		n, peer := d.Name(), []string{ip2, ip1}[k]
		d.Bgp().SetRouterId([]string{ip1, ip2}[k])
		p := d.Bgp().Ipv4Interfaces().Add().SetIpv4Name(n + ".ip4").Peers().Add().SetName(n + ".bgp")
		p.SetPeerAddress(peer).SetAsType(gosnappi.BgpV4PeerAsType.EBGP).SetAsNumber(uint32(65001 + k))
		if k == 1 {
			r := p.V4Routes().Add().SetName("d2.r4")
			r.Addresses().Add().SetAddress("10.20.0.0").SetPrefix(24).SetCount(1)
			r.AsPath().Segments().Add().SetType(gosnappi.BgpAsPathSegmentType.AS_SEQ).SetAsNumbers([]uint32{65100, 65101})
		}
		d.Isis().SetName(n + ".isis").SetSystemId([]string{"640000000001", "640000000002"}[k])
		d.Isis().Basic().SetHostname(n)
		i := d.Isis().Interfaces().Add().SetEthName(n + ".eth").SetName(n + ".isis.if")
		i.SetNetworkType(gosnappi.IsisInterfaceNetworkType.POINT_TO_POINT).SetLevelType(gosnappi.IsisInterfaceLevelType.LEVEL_2)
		i.L2Settings().SetHelloInterval(1).SetDeadInterval(3)
		if k == 1 {
			d.Isis().V4Routes().Add().SetName("d2.isis.r4").Addresses().Add().SetAddress("10.30.0.0").SetPrefix(24)
		}
	}
	return cfg
}

func TestABgpPeerAndAnIsisRouterWatchedUntilUp(t *testing.T) {
	ate := ondatra.ATE(t, "ate").OTG()
	cfg := routers(t)
	ate.PushConfig(t, cfg)
	ate.StartProtocols(t)
	for _, peer := range []string{"d1.bgp", "d2.bgp"} {
		_, ok := gnmi.Watch(t, ate, gnmi.OTG().BgpPeer(peer).SessionState().State(), time.Minute,
			func(v *ygnmi.Value[otg.E_BgpPeer_SessionState]) bool {
				s, ok := v.Val()
				return ok && s == otg.BgpPeer_SessionState_ESTABLISHED
			}).Await(t)
		if !ok {
			t.Fatalf("expected %s ESTABLISHED within a minute", peer)
		}
	}
	_, ok := gnmi.Watch(t, ate, gnmi.OTG().IsisRouter("d1.isis").Counters().Level2().SessionsUp().State(), time.Minute,
		func(v *ygnmi.Value[uint64]) bool { n, ok := v.Val(); return ok && n >= 1 }).Await(t)
	if !ok {
		t.Fatal("expected d1.isis to have a level 2 session up within a minute")
	}
	// d2's route in d2's LSP, as d1 learned it: featureprofiles' WatchAll on the LSP database.
	lsdb := gnmi.OTG().IsisRouter("d1.isis").LinkStateDatabase()
	_, ok = gnmi.WatchAll(t, ate, lsdb.LspsAny().Tlvs().ExtendedIpv4Reachability().Prefix("10.30.0.0").State(), time.Minute,
		func(v *ygnmi.Value[*otg.IsisRouter_LinkStateDatabase_Lsps_Tlvs_ExtendedIpv4Reachability_Prefix]) bool {
			p, present := v.Val()
			return present && p.GetPrefix() == "10.30.0.0" && p.GetPrefixLength() == 24
		}).Await(t)
	if !ok {
		t.Fatal("expected d1.isis to learn 10.30.0.0/24 in d2's LSP within a minute")
	}
	var hosts []string
	for _, l := range gnmi.GetAll(t, ate, lsdb.LspsAny().State()) {
		hosts = append(hosts, l.GetTlvs().GetHostnames().Hostname...)
		if l.GetPduType() != otg.Lsps_PduType_LEVEL_2 || l.GetSequenceNumber() == 0 {
			t.Errorf("expected a level 2 LSP with a sequence number; got %v #%d", l.GetPduType(), l.GetSequenceNumber())
		}
	}
	if fmt.Sprint(hosts) != "[d2]" {
		t.Errorf("expected d1.isis's database to hold d2's LSP by its hostname; got %v", hosts)
	}
	if n := gnmi.Get(t, ate, gnmi.OTG().BgpPeer("d1.bgp").Counters().InOpens().State()); n < 1 {
		t.Errorf("expected d1.bgp to count the OPEN it received; got %d", n)
	}
	// d2's range, as d1 learned it, keyed by address, length, origin and path id.
	prefixes, ok := gnmi.WatchAll(t, ate, gnmi.OTG().BgpPeer("d1.bgp").UnicastIpv4PrefixAny().State(), time.Minute,
		func(v *ygnmi.Value[*otg.BgpPeer_UnicastIpv4Prefix]) bool {
			p, ok := v.Val()
			return ok && p.GetAddress() == "10.20.0.0"
		}).Await(t)
	if !ok {
		t.Fatal("expected d1.bgp to learn 10.20.0.0/24 within a minute")
	}
	if p, _ := prefixes.Val(); p.GetPrefixLength() != 24 || p.GetNextHopIpv4Address() != ip2 || p.GetOrigin() != otg.UnicastIpv4Prefix_Origin_IGP {
		t.Errorf("expected 10.20.0.0/24 via %s, origin IGP; got /%d via %s, origin %v", ip2, p.GetPrefixLength(), p.GetNextHopIpv4Address(), p.GetOrigin())
	}
	// The AS path, a keyless list: d2's AS before the two it prepended.
	p := gnmi.Get(t, ate, gnmi.OTG().BgpPeer("d1.bgp").UnicastIpv4Prefix("10.20.0.0", 24, otg.UnicastIpv4Prefix_Origin_IGP, 0).State())
	if len(p.AsPath) != 1 || p.AsPath[0].GetSegmentType() != otg.State_SegmentType_AS_SEQUENCE ||
		fmt.Sprint(p.AsPath[0].AsNumbers) != "[65002 65100 65101]" {
		t.Errorf("expected one AS_SEQUENCE segment [65002 65100 65101]; got %d segments %v", len(p.AsPath), p.AsPath)
	}
}

func TestAPortsLinkReadsDownAfterALinkDown(t *testing.T) {
	ate := ondatra.ATE(t, "ate").OTG()
	cfg, _ := devices(t)
	ate.PushConfig(t, cfg)
	for _, state := range []struct {
		set  gosnappi.StatePortLinkStateEnum
		want otg.E_Port_Link
	}{{gosnappi.StatePortLinkState.DOWN, otg.Port_Link_DOWN}, {gosnappi.StatePortLinkState.UP, otg.Port_Link_UP}} {
		cs := gosnappi.NewControlState()
		cs.Port().Link().SetPortNames([]string{"port2"}).SetState(state.set)
		ate.SetControlState(t, cs)
		_, ok := gnmi.Watch(t, ate, gnmi.OTG().Port("port2").Link().State(), 30*time.Second,
			func(v *ygnmi.Value[otg.E_Port_Link]) bool { l, ok := v.Val(); return ok && l == state.want }).Await(t)
		if !ok {
			t.Fatalf("expected port2's link %v within 30 s", state.want)
		}
	}
}

func TestAppendConfigAndSetControlActionAreRefusedWithTheirReason(t *testing.T) {
	api := ondatra.ATE(t, "ate").OTG()
	raw := ondatra.ATE(t, "ate").RawAPIs().OTG(t)
	cfg, _ := devices(t)
	api.PushConfig(t, cfg)
	_, err := raw.AppendConfig(gosnappi.NewConfigAppend())
	if err == nil || !strings.Contains(err.Error(), "not part of the OTG subset gapless serves") {
		t.Errorf("expected AppendConfig refused, naming the subset; got %v", err)
	}
	ping := gosnappi.NewControlAction()
	ping.Protocol().Ipv4().Ping().Requests().Add().SetSrcName("d1.ip4").SetDstIp(ip2)
	_, err = raw.SetControlAction(ping)
	if err == nil || !strings.Contains(err.Error(), "not part of the OTG subset gapless serves") {
		t.Errorf("expected SetControlAction refused, naming the subset; got %v", err)
	}
}
