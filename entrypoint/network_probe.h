// Looking at the network the way a multi-host job needs to: does a host's name resolve yet, does its sshd
// answer, which interfaces and addresses this host has. Every call is bounded by its own timeout.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace train {

// The first IPv4 address `host` resolves to (a dotted address passes through), or nullopt with
// `why_not` saying what the resolver answered.
std::optional<std::string> resolve_ipv4(const std::string& host, std::string* why_not = nullptr);

// Connects to `address`:`port` and reads the start of the server's greeting; true when it begins with
// "SSH-". `why_not` says what happened otherwise (refused, timed out, not an SSH server). A readable
// `cancel_fd` (when not -1) ends the probe at once, unanswered.
bool ssh_answers(const std::string& address, int port, std::chrono::milliseconds timeout,
                 std::string* why_not = nullptr, int cancel_fd = -1);

// A connected TCP socket to `address`:`port` within `timeout`, or -1 with `why_not` set; `cancel_fd` as
// for ssh_answers.
int connect_tcp(const std::string& address, int port, std::chrono::milliseconds timeout, std::string* why_not,
                int cancel_fd = -1);

// This host's network interfaces, by name, in the kernel's order.
std::vector<std::string> interface_names();

// The IPv4 address of interface `name`, if it has one.
std::optional<std::string> interface_ipv4(const std::string& name);

}  // namespace train
