#include "server/peer_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace kvlab::server {
namespace {

// The peer of socket `fd` as (numeric address, port); false if it has none.
bool peer_of(int fd, std::string& addr, int& port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  } else {
    return false;
  }
  addr = buf;
  return true;
}

int find_socket(const std::string& want_addr, int want_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;  // "." and ".."
    // Other threads open and close their connections' descriptors all the
    // while; getpeername on one that is gone, or is not a socket, fails, and
    // one reused for another peer fails the address check.
    std::string addr;
    int port = -1;
    if (peer_of(int(fd), addr, port) && port == want_port && addr == want_addr) {
      found = int(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace

PeerWatch::PeerWatch(std::string remote_addr, int remote_port) : addr_(std::move(remote_addr)), port_(remote_port) {}

bool PeerWatch::gone() {
  if (fd_ < 0) fd_ = find_socket(addr_, port_);
  if (fd_ < 0) return false;
  pollfd p{fd_, short(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  if (p.revents & POLLIN) {  // bytes (a pipelined request) or an orderly close
    char c;
    return recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  return false;
}

}  // namespace kvlab::server
