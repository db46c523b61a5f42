// SPDX-License-Identifier: MIT OR GPL-2.0
//
// VLAN tags for an emulated host (an OTG device on a VLAN), on kernels without 802.1Q VLAN
// devices (CONFIG_VLAN_8021Q unset, as on this project's VM) as on those with them: one tc
// program on the host's macvlan egress pushes its tags (outer first in `gapless_vlan_tags`),
// one on its ingress pops them and drops whatever does not carry exactly those tags. So the
// kernel's ARP, ND and replies for the host go tagged, and the host hears only its VLAN.
//
// Built by scripts/build-xdp.sh with Debian's clang; the object is committed next to this
// file and embedded into gapless, so building gapless needs no clang.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct gapless_tags {
	__u16 n;          // 0, 1 or 2
	__u16 pad;
	__u16 tpid[2];    // host order, outer first
	__u16 tci[2];     // priority << 13 | id
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gapless_tags);
} gapless_vlan_tags SEC(".maps");

static __always_inline struct gapless_tags *tags(void)
{
	__u32 k = 0;
	return bpf_map_lookup_elem(&gapless_vlan_tags, &k);
}

SEC("classifier")
int gapless_vlan_out(struct __sk_buff *skb)
{
	struct gapless_tags *t = tags();
	if (!t)
		return TC_ACT_OK;
	// The innermost first: a push moves the tag before it into the frame.
	if (t->n >= 2 && bpf_skb_vlan_push(skb, bpf_htons(t->tpid[1]), t->tci[1]))
		return TC_ACT_SHOT;
	if (t->n >= 1 && bpf_skb_vlan_push(skb, bpf_htons(t->tpid[0]), t->tci[0]))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

static __always_inline int pop_one(struct __sk_buff *skb, struct gapless_tags *t, int i)
{
	if (!skb->vlan_present)
		return -1;
	if ((skb->vlan_tci & 0x0fff) != (t->tci[i] & 0x0fff) || skb->vlan_proto != bpf_htons(t->tpid[i]))
		return -1;
	return bpf_skb_vlan_pop(skb);
}

SEC("classifier")
int gapless_vlan_in(struct __sk_buff *skb)
{
	struct gapless_tags *t = tags();
	if (!t)
		return TC_ACT_OK;
	if (t->n >= 1 && pop_one(skb, t, 0))
		return TC_ACT_SHOT;
	if (t->n >= 2 && pop_one(skb, t, 1))
		return TC_ACT_SHOT;
	// A frame with more tags than the host's, or untagged at a tagged host, is not its own.
	if (skb->vlan_present || skb->protocol == bpf_htons(0x8100) || skb->protocol == bpf_htons(0x88a8))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
