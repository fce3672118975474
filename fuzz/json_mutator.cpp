#include "fuzz/json_mutator.h"

#include <cstring>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_support.h"
#include "reference_engine/config/json_text.h"

#ifdef TPB_LIBFUZZER
extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);
#endif

namespace tpb::fuzz {

namespace {

using json = nlohmann::json;

// Every node's pointer, and every key and short string seen (material for new values).
void collect(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& nodes,
             std::vector<std::string>& words) {
  nodes.push_back(at);
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      words.push_back(k);
      collect(v, at / k, nodes, words);
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) collect(j[i], at / i, nodes, words);
  } else if (j.is_string() && j.get_ref<const std::string&>().size() <= 64) {
    words.push_back(j.get<std::string>());
  }
}

json edge_value(std::mt19937_64& rng, const std::vector<std::string>& words) {
  switch (rng() % 24) {
    case 0: return nullptr;
    case 1: return true;
    case 2: return false;
    case 3: return 0;
    case 4: return -1;
    case 5: return 1;
    case 6: return 2;
    case 7: return 65;
    case 8: return std::numeric_limits<std::int32_t>::max();
    case 9: return std::int64_t{1} << 31;
    case 10: return std::numeric_limits<std::int64_t>::max();
    case 11: return std::numeric_limits<std::int64_t>::min();
    case 12: return std::numeric_limits<std::uint64_t>::max();
    case 13: return 1e308;
    case 14: return -1e308;
    case 15: return 4.9e-324;
    case 16: return 0.5;
    case 17: return -0.0;
    case 18: return "";
    case 19: return std::string(300, 'x');
    case 20: return json::array();
    case 21: return json::object();
    case 22: return std::int64_t{1} << 53 | 1;
    default: return words.empty() ? json("x") : json(words[rng() % words.size()]);
  }
}

std::string mutate_json(std::string_view text, std::mt19937_64& rng) {
  JsonText parsed = parse_json_text(text);
  if (!parsed.problem.empty()) return "";
  json doc = std::move(parsed.value);
  std::vector<json::json_pointer> nodes;
  std::vector<std::string> words;
  collect(doc, json::json_pointer(), nodes, words);
  const json::json_pointer at = nodes[rng() % nodes.size()];
  json& node = doc[at];
  switch (rng() % 8) {
    case 0:
    case 1:
      node = edge_value(rng, words);
      break;
    case 2:  // remove it from its parent
      if (!at.empty()) {
        json& parent = doc[at.parent_pointer()];
        if (parent.is_object()) parent.erase(at.back());
        else parent.erase(std::stoul(at.back()));
      }
      break;
    case 3:  // add a key (one the document uses elsewhere) or an element
      if (node.is_object()) node[words.empty() ? "x" : words[rng() % words.size()]] = edge_value(rng, words);
      else if (node.is_array()) node.push_back(node.empty() ? edge_value(rng, words) : json(node[rng() % node.size()]));
      else node = edge_value(rng, words);
      break;
    case 4: {  // another node's value here
      const json other = doc[nodes[rng() % nodes.size()]];
      doc[at] = other;
      break;
    }
    case 5:  // wrapped
      node = rng() % 2 ? json::array({node}) : json{{words.empty() ? "x" : words[rng() % words.size()], node}};
      break;
    case 6:  // a number nudged
      if (node.is_number_integer())  // wrapping, in unsigned arithmetic: INT64_MAX + 1 is a mutation too
        node = static_cast<std::int64_t>(node.get<std::uint64_t>() + rng() % 5 - 2);
      else if (node.is_number_float()) node = node.get<double>() * (rng() % 2 ? 1e6 : -1.0);
      else node = edge_value(rng, words);
      break;
    default:  // a string changed
      node = node.is_string() ? json(node.get<std::string>() + (rng() % 2 ? "/../x" : "")) : edge_value(rng, words);
      break;
  }
  return doc.dump(rng() % 4 == 0 ? 1 : -1);
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      if (start < text.size()) lines.emplace_back(text.substr(start));
      break;
    }
    lines.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string mutate_json_lines(std::string_view text, std::mt19937_64& rng) {
  std::vector<std::string> lines = split_lines(text);
  if (lines.empty()) return "";
  const std::size_t i = rng() % lines.size();
  switch (rng() % 8) {
    case 0:  // a line again, elsewhere (a resumed run's repeat, a control's second record)
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(rng() % (lines.size() + 1)), lines[i]);
      break;
    case 1:
      lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    case 2:  // the split compare_fuzzer reads, somewhere
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(rng() % (lines.size() + 1)), "----");
      break;
    default: {
      const std::string m = mutate_json(lines[i], rng);
      if (m.empty()) return "";
      lines[i] = m.find('\n') == std::string::npos ? m : json::parse(m).dump();
      break;
    }
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::string mutate_safetensors(std::string_view bytes, std::mt19937_64& rng) {
  if (bytes.size() < 8) return "";
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (n > bytes.size() - 8) return "";
  std::string header = mutate_json(bytes.substr(8, n), rng);
  if (header.empty()) return "";
  std::uint64_t len = header.size();
  if (rng() % 16 == 0) len += rng() % 3 - 1;  // a length one off now and then
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
  std::string data(bytes.substr(8 + n));
  if (!data.empty() && rng() % 4 == 0) data.resize(rng() % data.size());  // a file cut short
  return out + header + data;
}

}  // namespace

std::string mutate_structured(std::string_view input, InputFormat format, std::mt19937_64& rng) {
  switch (format) {
    case InputFormat::json: return mutate_json(input, rng);
    case InputFormat::json_lines: return mutate_json_lines(input, rng);
    case InputFormat::safetensors: return mutate_safetensors(input, rng);
  }
  return "";
}

std::size_t custom_mutate(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed,
                          InputFormat format) {
  std::mt19937_64 rng(seed);
  if (rng() % 4 != 0) {
    std::string out;
    try {
      out = mutate_structured(as_text(data, size), format, rng);
    } catch (const std::exception&) {  // a mutation nlohmann cannot serialise: mutate bytes instead
      out.clear();
    }
    if (!out.empty() && out.size() <= max_size) {
      std::memcpy(data, out.data(), out.size());
      return out.size();
    }
  }
#ifdef TPB_LIBFUZZER
  return LLVMFuzzerMutate(data, size, max_size);
#else
  return size;
#endif
}

}  // namespace tpb::fuzz
