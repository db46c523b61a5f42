// SPDX-License-Identifier: MIT OR GPL-2.0
//
// gapless's AF_XDP receive program. For every frame on an RX queue that has a gapless AF_XDP
// socket in `gapless_xsks`, it stamps the frame with the kernel's TAI clock (in 16 bytes of
// XDP metadata, just before the frame in the UMEM) and redirects it to that socket. ARP goes
// to the kernel stack as usual, so the host stays reachable; so does everything on a queue
// without a socket.
//
// Built by scripts/build-xdp.sh with Debian's clang; the object is committed next to this
// file and embedded into gapless, so building gapless needs no clang.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// "GLTS": the metadata is ours.
#define GAPLESS_META_MAGIC 0x53544c47u

struct gapless_meta {
	__u64 rx_tai_ns;
	__u32 magic;
	__u32 reserved;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} gapless_xsks SEC(".maps");

SEC("xdp")
int gapless_rx(struct xdp_md *ctx)
{
	__u32 q = ctx->rx_queue_index;
	__u64 now = bpf_ktime_get_tai_ns();
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return XDP_PASS;
	if (!bpf_map_lookup_elem(&gapless_xsks, &q))
		return XDP_PASS;
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct gapless_meta)) == 0) {
		struct gapless_meta *m = (void *)(long)ctx->data_meta;
		data = (void *)(long)ctx->data;
		if ((void *)(m + 1) <= data) {
			m->rx_tai_ns = now;
			m->magic = GAPLESS_META_MAGIC;
			m->reserved = 0;
		}
	}
	return bpf_redirect_map(&gapless_xsks, q, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
