#pragma once
// PruneJson: cuts from a JSON text the object members a filter names, at byte speed and building
// nothing, so that the large parts of a list page the reader drops anyway (a pod's managedFields,
// last-applied copy, env) are never lexed by the parser (Client::ListPages; docs/benchmarks.md,
// "Scheduler at scale").
//
// `cut` sees each member's depth and key as nlohmann's parser callback does (the members of the
// top-level object are depth 1) and is asked only about members outside what it cut; keys written
// with escapes are never cut here. The result drops the whitespace between tokens and the members
// cut, and copies everything kept byte for byte: parsing it gives what parsing the whole text with
// the same cut made in a parser callback gives. What is cut is scanned (strings, matching
// brackets), not validated. A text that does not scan as JSON (brackets that do not match, a
// missing comma or colon, an unterminated string, nesting deeper than kMaxPruneDepth) is returned
// whole, for the parser to reject.
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace hami::k8s {

inline constexpr size_t kMaxPruneDepth = 512;

std::string PruneJson(std::string_view text,
                      const std::function<bool(int depth, const std::string& key)>& cut);

// The text of the value of member `key` of the top-level object (the first such member, key
// written without escapes), found by the same scan, or nullopt: no such member, or a text that does
// not scan as an object up to it. Client::ListPages reads a page's continue token with it before
// the page is parsed, to ask for the next page meanwhile.
std::optional<std::string_view> TopLevelMember(std::string_view text, std::string_view key);

}  // namespace hami::k8s
