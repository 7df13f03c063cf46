#include "runtime/parallel/link_beat.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "runtime/parallel/collective_record.h"  // wall_seconds

namespace dlscale {

namespace {

constexpr const char* kMagic = "dlscale-link";

// Every IPv4 address of this host's interfaces that are up, loopback first.
std::vector<std::string> host_addresses() {
  std::vector<std::string> out{"127.0.0.1"};
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
    if (a->ifa_flags & IFF_LOOPBACK) continue;
    char text[INET_ADDRSTRLEN] = "";
    if (inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text))
      out.emplace_back(text);
  }
  freeifaddrs(list);
  return out;
}

std::optional<LinkAddress> read_link_address(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_link_address(text.str());
}

}  // namespace

std::string listener_file(const std::string& heartbeat_dir) { return heartbeat_dir + "/listener"; }

std::string to_json_line(const LinkAddress& w) {
  return nlohmann::json{{"token", w.token}, {"port", w.port}, {"addresses", w.addresses}}.dump() + "\n";
}

std::optional<LinkAddress> parse_link_address(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    LinkAddress w{j.at("token").get<std::string>(), j.at("port").get<int>(),
                  j.at("addresses").get<std::vector<std::string>>()};
    if (w.token.empty() || w.port <= 0 || w.port > 65535) return std::nullopt;
    return w;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

LinkListener::LinkListener(const std::string& dir, int world_size) : heard_(static_cast<std::size_t>(world_size)) {
  for (auto& h : heard_) h.store(0);
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("link heartbeat: no UDP socket: ") + std::strerror(errno));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = 0;  // any free port: several jobs may share a node
  socklen_t length = sizeof any;
  if (bind(fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&any), &length) != 0) {
    const std::string why = std::strerror(errno);
    close(fd_);
    throw std::runtime_error("link heartbeat: cannot bind a UDP port: " + why);
  }
  where_.port = ntohs(any.sin_port);
  where_.token = std::to_string(getpid()) + "-" + std::to_string(static_cast<long long>(wall_seconds() * 1e6));
  where_.addresses = host_addresses();
  // Published aside, then renamed: a sender reads it whole or not at all.
  // The folder is made by the heartbeat writer; until it exists a sender
  // finds nothing and sends nothing, so the file is tried again on each
  // poll until it is there.
  thread_ = std::thread([this, path = listener_file(dir)] {
    bool published = false;
    while (!stop_.load()) {
      if (!published) {
        const std::string tmp = path + ".tmp";
        if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
          const bool ok = std::fputs(to_json_line(where_).c_str(), f) >= 0;
          published = std::fclose(f) == 0 && ok && std::rename(tmp.c_str(), path.c_str()) == 0;
        }
      }
      receive_once();
    }
  });
}

LinkListener::~LinkListener() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  close(fd_);
}

double LinkListener::last_heard(int rank) const {
  return rank >= 0 && rank < static_cast<int>(heard_.size()) ? heard_[static_cast<std::size_t>(rank)].load() : 0;
}

void LinkListener::receive_once() {
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, 200) <= 0) return;
  char buffer[256];
  for (;;) {
    const ssize_t n = recv(fd_, buffer, sizeof buffer - 1, 0);
    if (n <= 0) return;
    buffer[n] = '\0';
    char magic[16] = "", token[96] = "";
    int rank = -1;
    if (std::sscanf(buffer, "%15s %95s %d", magic, token, &rank) != 3) continue;
    if (std::strcmp(magic, kMagic) != 0 || where_.token != token) continue;
    if (rank >= 0 && rank < static_cast<int>(heard_.size())) heard_[static_cast<std::size_t>(rank)].store(wall_seconds());
  }
}

LinkBeatSender::LinkBeatSender(std::string dir, int rank) : dir_(std::move(dir)), rank_(rank) {
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}

LinkBeatSender::~LinkBeatSender() {
  if (fd_ >= 0) close(fd_);
}

void LinkBeatSender::beat() {
  if (fd_ < 0) return;
  const auto where = read_link_address(listener_file(dir_));
  if (!where) return;
  const std::string text = std::string(kMagic) + " " + where->token + " " + std::to_string(rank_);
  for (const auto& address : where->addresses) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(where->port));
    if (inet_pton(AF_INET, address.c_str(), &to.sin_addr) != 1) continue;
    // MSG_DONTWAIT: a full send queue or an unreachable network costs this beat, never the thread.
    (void)sendto(fd_, text.data(), text.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), sizeof to);
  }
}

}  // namespace dlscale
