// Path patterns: shell-style brace expansion ("shard-{000..099}.tar",
// "{train,val}/*.jpg") and glob matching of '/'-separated relative paths with
// "**", "*", "?" and "[...]". Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gm {

// Expands every brace group of `pattern`, left to right: "{a,b,c}" lists (which may
// nest) and "{N..M}" integer ranges (ascending or descending; the width of the
// wider zero-padded bound is kept, so "{000..099}" gives "000", ..., "099").
// A pattern without braces expands to itself. InvalidArgument names the pattern
// for an unbalanced brace, or an expansion of more than 1,000,000 strings.
Result<std::vector<std::string>> ExpandBraces(std::string_view pattern);

// True when the relative path `path` (components separated by '/') matches the
// glob `pattern`: "**" as a whole component matches zero or more components;
// within a component "*" matches any run of characters, "?" any one character and
// "[...]" a set (fnmatch(3) rules). Braces are not special here: expand them first.
bool GlobMatch(std::string_view pattern, std::string_view path);

}  // namespace gm
