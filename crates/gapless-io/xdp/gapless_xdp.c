// SPDX-License-Identifier: MIT OR GPL-2.0
//
// gapless's AF_XDP receive programs. For every frame on an RX queue that has a gapless AF_XDP
// socket in `gapless_xsks`, each redirects the frame to that socket. ARP goes to the kernel
// stack as usual, so the host stays reachable; so does everything on a queue without a
// socket. They differ in where the kernel's RX stamp (its TAI clock at the XDP hook) goes:
//
//   gapless_rx        in 16 bytes of XDP metadata just before the frame (bpf_xdp_adjust_meta);
//   gapless_rx_prefix in 16 bytes put in front of the frame (bpf_xdp_adjust_head), which the
//                     meter reads and cuts off: for kernels that refuse the metadata helper;
//   gapless_rx_plain  nowhere: the meter stamps each frame when it reads it (costs precision;
//                     for kernels that refuse both).
//
// gapless loads them in that order and keeps the first the kernel accepts (DESIGN-NOTES 90).
// Built by scripts/build-xdp.sh with Debian's clang; the object is committed next to this
// file and embedded into gapless, so building gapless needs no clang.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// "GLTS": the metadata is ours.
#define GAPLESS_META_MAGIC 0x53544c47u
// "GLTP": the prefix is ours; its check word is the stamp's low 32 bits inverted.
#define GAPLESS_PREFIX_MAGIC 0x50544c47u

struct gapless_meta {
	__u64 rx_tai_ns;
	__u32 magic;
	__u32 reserved;
};

struct gapless_prefix {
	__u64 rx_tai_ns;
	__u32 magic;
	__u32 check;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} gapless_xsks SEC(".maps");

// 1 when the frame goes to the queue's socket: not ARP, and the queue has one.
static __always_inline int ours(struct xdp_md *ctx, __u32 *q)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	*q = ctx->rx_queue_index;
	if ((void *)(eth + 1) > end)
		return 0;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return 0;
	return bpf_map_lookup_elem(&gapless_xsks, q) != 0;
}

SEC("xdp")
int gapless_rx(struct xdp_md *ctx)
{
	__u64 now = bpf_ktime_get_tai_ns();
	__u32 q;

	if (!ours(ctx, &q))
		return XDP_PASS;
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct gapless_meta)) == 0) {
		struct gapless_meta *m = (void *)(long)ctx->data_meta;
		void *data = (void *)(long)ctx->data;
		if ((void *)(m + 1) <= data) {
			m->rx_tai_ns = now;
			m->magic = GAPLESS_META_MAGIC;
			m->reserved = 0;
		}
	}
	return bpf_redirect_map(&gapless_xsks, q, XDP_PASS);
}

SEC("xdp")
int gapless_rx_prefix(struct xdp_md *ctx)
{
	__u64 now = bpf_ktime_get_tai_ns();
	__u32 q;

	if (!ours(ctx, &q))
		return XDP_PASS;
	// XDP keeps XDP_PACKET_HEADROOM (256 B) before every frame, so there is room.
	if (bpf_xdp_adjust_head(ctx, -(int)sizeof(struct gapless_prefix)) == 0) {
		struct gapless_prefix *p = (void *)(long)ctx->data;
		void *end = (void *)(long)ctx->data_end;
		if ((void *)(p + 1) <= end) {
			p->rx_tai_ns = now;
			p->magic = GAPLESS_PREFIX_MAGIC;
			p->check = ~(__u32)now;
		}
	}
	return bpf_redirect_map(&gapless_xsks, q, XDP_PASS);
}

SEC("xdp")
int gapless_rx_plain(struct xdp_md *ctx)
{
	__u32 q;

	if (!ours(ctx, &q))
		return XDP_PASS;
	return bpf_redirect_map(&gapless_xsks, q, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
