// "Did you mean": the known names closest to a mistyped one, for the error that refuses it
// (an unknown subcommand, option, scenario, preset, GPU). Header-only: every layer uses it.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

namespace tpb {

// Edit distance (insert, delete, substitute, swap of neighbours), case-insensitive.
inline std::size_t name_distance(const std::string& a, const std::string& b) {
  const auto low = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = low(a[i - 1]) == low(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && low(a[i - 1]) == low(b[j - 2]) && low(a[i - 2]) == low(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

// Whether `word`'s letters and digits appear in `name`'s in order ("rtx6000" in "RTX-PRO-6000"),
// case-insensitive: an abbreviation of it.
inline bool abbreviates(const std::string& word, const std::string& name) {
  std::string w, n;
  for (char c : word)
    if (std::isalnum(static_cast<unsigned char>(c))) w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c))) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (w.size() < 4 || n.size() > 2 * w.size()) return false;  // short words abbreviate everything
  std::size_t i = 0;
  for (char c : n)
    if (i < w.size() && c == w[i]) ++i;
  return i == w.size();
}

// Up to three candidates within max(1, word length / 3) edits of `word` (another case is no
// edit), or that it abbreviates, nearest first; `word` itself is never offered.
inline std::vector<std::string> closest_names(const std::string& word, const std::vector<std::string>& candidates) {
  const std::size_t limit = std::max<std::size_t>(1, word.size() / 3);
  std::vector<std::pair<std::size_t, std::string>> near;
  for (const auto& c : candidates) {
    std::size_t d = name_distance(word, c);
    if (d > limit && abbreviates(word, c)) d = limit;
    if (d <= limit && c != word && std::none_of(near.begin(), near.end(), [&](const auto& n) { return n.second == c; }))
      near.emplace_back(d, c);
  }
  std::stable_sort(near.begin(), near.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < near.size() && i < 3; ++i) out.push_back(near[i].second);
  return out;
}

// "; did you mean 'x'?" or "; did you mean 'x' or 'y'?"; empty when nothing is close.
inline std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const auto near = closest_names(word, candidates);
  if (near.empty()) return "";
  std::string out = "; did you mean ";
  for (std::size_t i = 0; i < near.size(); ++i)
    out += (i == 0 ? "'" : i + 1 == near.size() ? " or '" : ", '") + near[i] + "'";
  return out + "?";
}

}  // namespace tpb
