// The bare reference for gapless's precise mode: one 64-byte UDP frame per sendto() on an
// AF_PACKET socket, each at its absolute time on a TSC schedule, busy-waiting in between.
// No batching, no histogram, no stamping: what gapless at batch 1 must at least match.
//
//   cc -O2 -o sendto_loop sendto_loop.c
//   sendto_loop IFACE RATE_PPS SECONDS [CORE]     (run it in the sender's netns)
//
// Prints: frames sent, failed sends, elapsed s, achieved pps, frames more than a gap late.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

// TSC ticks per ns, from 100 ms against CLOCK_MONOTONIC.
static double tsc_per_ns(void) {
  uint64_t n0 = mono_ns(), t0 = __rdtsc();
  while (mono_ns() - n0 < 100000000ull) {
  }
  return (double)(__rdtsc() - t0) / (double)(mono_ns() - n0);
}

static uint16_t csum(const uint8_t *p, int n) {
  uint32_t s = 0;
  for (int i = 0; i < n; i += 2) s += (uint32_t)(p[i] << 8 | p[i + 1]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return (uint16_t)~s;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s IFACE RATE_PPS SECONDS [CORE]\n", argv[0]);
    return 2;
  }
  double rate = atof(argv[2]), secs = atof(argv[3]);
  if (argc > 4) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(argv[4]), &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  int fd = socket(AF_PACKET, SOCK_RAW, 0);
  if (fd < 0) {
    perror("socket");
    return 1;
  }
  int one = 1;
  setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
  struct sockaddr_ll to = {.sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex(argv[1]), .sll_halen = 6};
  if (!to.sll_ifindex) {
    perror("if_nametoindex");
    return 1;
  }
  // Ethernet, IPv4 198.18.0.1 -> .2, UDP 1024 -> 7: 60 bytes without FCS.
  uint8_t f[60] = {0x02, 0x67, 0x6c, 0, 0, 2, 0x02, 0x67, 0x6c, 0, 0, 1, 0x08, 0x00};
  uint8_t *ip = f + 14;
  ip[0] = 0x45, ip[3] = 46, ip[8] = 64, ip[9] = 17;
  ip[12] = 198, ip[13] = 18, ip[14] = 0, ip[15] = 1, ip[16] = 198, ip[17] = 18, ip[18] = 0, ip[19] = 2;
  uint16_t c = csum(ip, 20);
  ip[10] = c >> 8, ip[11] = c & 0xff;
  uint8_t *udp = ip + 20;
  udp[0] = 4, udp[1] = 0, udp[3] = 7, udp[5] = 26;
  memcpy(to.sll_addr, f, 6);
  double tpn = tsc_per_ns();
  double gap_ns = 1e9 / rate;
  uint64_t n = (uint64_t)(rate * secs), sent = 0, failed = 0, late = 0;
  uint64_t t0 = __rdtsc();
  uint64_t gap_tsc = (uint64_t)(gap_ns * tpn);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t at = t0 + (uint64_t)((double)i * gap_ns * tpn);
    uint64_t now;
    while ((now = __rdtsc()) < at) {
    }
    if (now - at > gap_tsc) late++;
    if (sendto(fd, f, sizeof f, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)sizeof f)
      sent++;
    else
      failed++;
  }
  double el = (double)(__rdtsc() - t0) / tpn / 1e9;
  printf("sent %llu failed %llu elapsed %.6f pps %.1f late_over_gap %llu\n", (unsigned long long)sent,
         (unsigned long long)failed, el, (double)sent / el, (unsigned long long)late);
  return 0;
}
