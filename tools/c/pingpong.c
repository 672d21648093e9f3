/* A minimal TCP ping-pong, the reference comm-bench's tcp latency is compared with.
 *   pingpong server PORT BYTES ITERS          (on 0.0.0.0)
 *   pingpong client HOST PORT BYTES ITERS     prints one RTT/2 per line, in microseconds */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void xfer(int fd, char *buf, size_t n, int do_send) {
  while (n > 0) {
    ssize_t k = do_send ? send(fd, buf, n, 0) : recv(fd, buf, n, 0);
    if (k <= 0) { perror("xfer"); exit(1); }
    buf += k; n -= (size_t)k;
  }
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage: see the comment at the top\n"); return 2; }
  int server = strcmp(argv[1], "server") == 0, one = 1, fd;
  int port = atoi(argv[server ? 2 : 3]);
  size_t bytes = (size_t)atol(argv[server ? 3 : 4]);
  int iters = atoi(argv[server ? 4 : 5]);
  char *buf = calloc(bytes, 1);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (server) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    a.sin_addr.s_addr = INADDR_ANY;
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1)) { perror("listen"); return 1; }
    fd = accept(l, NULL, NULL);
  } else {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    inet_pton(AF_INET, argv[2], &a.sin_addr);
    for (int tries = 0; connect(fd, (struct sockaddr *)&a, sizeof a); ++tries) {
      if (tries > 200) { perror("connect"); return 1; }
      close(fd); fd = socket(AF_INET, SOCK_STREAM, 0); usleep(20000);
    }
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  for (int i = 0; i < iters; ++i) {
    if (server) { xfer(fd, buf, bytes, 0); xfer(fd, buf, bytes, 1); continue; }
    double t0 = now_us();
    xfer(fd, buf, bytes, 1); xfer(fd, buf, bytes, 0);
    printf("%.3f\n", (now_us() - t0) / 2);
  }
  return 0;
}
