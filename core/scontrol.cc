#include "core/scontrol.h"

#include <cctype>
#include <sstream>

namespace gm {

std::vector<std::pair<std::string, std::string>> ScontrolFields(const std::string& line) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(line);
  std::string token;
  while (in >> token) {
    auto eq = token.find('=');
    bool is_key = eq != std::string::npos && eq > 0;
    for (size_t i = 0; is_key && i < eq; ++i) {
      const char c = token[i];
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '/' && c != ':') {
        is_key = false;
      }
    }
    if (is_key) {
      out.emplace_back(token.substr(0, eq), token.substr(eq + 1));
    } else if (!out.empty()) {
      out.back().second += " " + token;  // a value with spaces (OS=, Reason=)
    }
  }
  return out;
}

}  // namespace gm
