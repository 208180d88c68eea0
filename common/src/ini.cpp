#include "elastic/common/ini.h"

#include <fstream>

#include <boost/program_options.hpp>

namespace elastic::config {

Status LoadIniFile(const std::string& path, const std::vector<KeySpec>& table) {
  namespace po = boost::program_options;
  std::ifstream in(path);
  if (!in) return Status(ErrorKind::kNotFound, path + ": cannot open the file");
  po::options_description desc;
  for (const auto& k : table) desc.add_options()(k.key.c_str(), po::value<std::string>(), k.help.c_str());
  po::variables_map vm;
  try {
    po::store(po::parse_config_file(in, desc, /*allow_unregistered=*/false), vm);
  } catch (const po::unknown_option& e) {
    std::string known;
    for (const auto& k : table) known += (known.empty() ? "" : ", ") + k.key;
    return Status(ErrorKind::kConfig, path + ": unknown setting '" + e.get_option_name() + "' (known: " + known + ")");
  } catch (const po::multiple_occurrences& e) {
    return Status(ErrorKind::kConfig, path + ": '" + e.get_option_name() + "' is set twice");
  } catch (const po::error& e) {
    return Status(ErrorKind::kConfig, path + ": " + e.what());
  }
  std::vector<std::string> args;
  for (const auto& k : table) {
    auto it = vm.find(k.key);
    if (it != vm.end()) args.push_back(k.key + "=" + it->second.as<std::string>());
  }
  Status s = ParseKeyValueArgs(args, table);
  if (!s.ok()) return Status(ErrorKind::kConfig, path + ": " + s.message());
  return Status::Ok();
}

}  // namespace elastic::config
