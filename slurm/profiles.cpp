// Reading the profiles file: a small INI dialect with a fixed key table, so a
// misspelt key is an error that names the file, line, section and key instead
// of a job submitted with the wrong resources.
#include "slurm/profiles.h"
#include "runtime/core/error.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>


namespace dlscale {

namespace {

struct Place {
  const std::string& path;
  int line;
  const std::string& section;
  std::string where() const { return path + ":" + std::to_string(line) + ": [" + section + "] "; }
};

int positive_int(const Place& at, const std::string& key, const std::string& value, int min) {
  try {
    std::size_t used = 0;
    int v = std::stoi(value, &used);
    if (used == value.size() && v >= min) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(at.where() + key + " = " + value + ": expected an integer >= " + std::to_string(min));
}

bool boolean(const Place& at, const std::string& key, const std::string& value) {
  if (value == "true" || value == "yes" || value == "1" || value == "on") return true;
  if (value == "false" || value == "no" || value == "0" || value == "off") return false;
  throw UsageError(at.where() + key + " = " + value + ": expected true or false");
}

// Slurm's time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
void check_time(const Place& at, const std::string& value) {
  static const std::regex time(R"(([0-9]+-)?[0-9]+(:[0-9]+){0,2}|UNLIMITED|unlimited|infinite)");
  if (!std::regex_match(value, time))
    throw UsageError(at.where() + "time = " + value + ": expected a Slurm time limit such as 30, 02:00:00 or 1-12:00:00");
}

struct Key {
  const char* name;
  bool slurm_only;
  bool repeatable;
  std::function<void(Profile&, const Place&, const std::string&)> set;
};

const std::vector<Key>& keys() {
  static const std::vector<Key> table = {
      {"type", false, false, [](Profile&, const Place&, const std::string&) {}},  // read first, see below
      {"job-root", false, false, [](Profile& p, const Place&, const std::string& v) { p.job_root = v; }},
      {"nodes", true, false, [](Profile& p, const Place& at, const std::string& v) { set_node_count(p, v, at.where() + "nodes"); }},
      {"tasks-per-node", false, false,
       [](Profile& p, const Place& at, const std::string& v) { p.tasks_per_node = positive_int(at, "tasks-per-node", v, 1); }},
      {"partition", true, false, [](Profile& p, const Place&, const std::string& v) { p.partition = v; }},
      {"account", true, false, [](Profile& p, const Place&, const std::string& v) { p.account = v; }},
      {"qos", true, false, [](Profile& p, const Place&, const std::string& v) { p.qos = v; }},
      {"time", true, false,
       [](Profile& p, const Place& at, const std::string& v) {
         check_time(at, v);
         p.time = v;
       }},
      {"cpus-per-task", true, false,
       [](Profile& p, const Place& at, const std::string& v) { p.cpus_per_task = positive_int(at, "cpus-per-task", v, 1); }},
      {"gpus-per-node", true, false,
       [](Profile& p, const Place& at, const std::string& v) { p.gpus_per_node = positive_int(at, "gpus-per-node", v, 0); }},
      {"gpus-per-task", true, false,
       [](Profile& p, const Place& at, const std::string& v) {
         p.gpus_per_task = positive_int(at, "gpus-per-task", v, 0);
         // One rank drives one GPU: a second one per task would sit idle.
         if (p.gpus_per_task > 1)
           throw UsageError(at.where() + "gpus-per-task = " + v +
                            ": each dlscale rank drives one GPU; set gpus-per-task = 1 and more tasks-per-node "
                            "(one rank per GPU) instead");
       }},
      {"gpu-bind", true, false, [](Profile& p, const Place&, const std::string& v) { p.gpu_bind = v; }},
      {"mpi", true, false, [](Profile& p, const Place&, const std::string& v) { p.mpi = v; }},
      {"pmix-fence", true, false,
       [](Profile& p, const Place& at, const std::string& v) {
         if (v != "ring" && v != "tree" && v != "mixed")
           throw UsageError(at.where() + "pmix-fence = " + v + ": expected ring, tree or mixed");
         p.pmix_fence = v;
       }},
      {"sbatch", true, true,
       [](Profile& p, const Place& at, const std::string& v) {
         if (v.empty() || v[0] != '-')
           throw UsageError(at.where() + "sbatch = " + v + ": expected an sbatch option such as --constraint=a100");
         p.sbatch_options.push_back(v);
       }},
      {"module", true, true,
       [](Profile& p, const Place&, const std::string& v) {
         std::istringstream words(v);
         for (std::string m; words >> m;) p.modules.push_back(m);
       }},
      {"stage-data", true, false, [](Profile& p, const Place& at, const std::string& v) { p.stage_data = boolean(at, "stage-data", v); }},
      {"stage-dir", true, false, [](Profile& p, const Place&, const std::string& v) { p.stage_dir = v; }},
      {"data-root", false, false, [](Profile& p, const Place&, const std::string& v) { p.data_root = v; }},
      {"signal-lead", true, false,
       [](Profile& p, const Place& at, const std::string& v) {
         p.signal_lead = positive_int(at, "signal-lead", v, 0);
         if (p.signal_lead > 65535)  // sbatch's limit for --signal's @time
           throw UsageError(at.where() + "signal-lead = " + v + ": at most 65535 seconds");
       }},
  };
  return table;
}

std::string known_keys() {
  std::string s;
  for (const auto& k : keys()) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// A comment is a line starting with # or ;, or " #" after a value (so a path
// may still contain '#').
std::string strip_comment(const std::string& line) {
  std::string t = trim(line);
  if (t.empty() || t[0] == '#' || t[0] == ';') return "";
  for (std::size_t i = 1; i < t.size(); ++i)
    if (t[i] == '#' && (t[i - 1] == ' ' || t[i - 1] == '\t')) return trim(t.substr(0, i));
  return t;
}

struct Entry {
  int line;
  std::string key, value;
};
struct Section {
  std::string name;
  int line;
  std::vector<Entry> entries;
};

Profile build_profile(const Section& s, const std::string& path) {
  Profile p;
  p.name = s.name;
  p.source = path;
  for (const auto& e : s.entries)
    if (e.key == "type") {
      if (e.value != "local" && e.value != "slurm")
        throw UsageError(Place{path, e.line, s.name}.where() + "type = " + e.value + ": expected local or slurm");
      p.type = e.value;
    }
  if (s.name == "local" && p.type != "local")
    throw UsageError(path + ":" + std::to_string(s.line) + ": [local] is the built-in local profile; its type must be local");
  std::vector<std::string> seen;
  for (const auto& e : s.entries) {
    Place at{path, e.line, s.name};
    const Key* key = nullptr;
    for (const auto& k : keys())
      if (e.key == k.name) key = &k;
    if (!key) throw UsageError(at.where() + "unknown key '" + e.key + "' (known keys: " + known_keys() + ")");
    if (key->slurm_only && !p.is_slurm())
      throw UsageError(at.where() + "key '" + e.key + "' applies to slurm profiles only (this one is type " + p.type + ")");
    if (!key->repeatable && std::find(seen.begin(), seen.end(), e.key) != seen.end())
      throw UsageError(at.where() + "key '" + e.key + "' is given twice");
    seen.push_back(e.key);
    key->set(p, at, e.value);
  }
  if (p.gpus_per_node && p.gpus_per_task)
    throw UsageError(path + ": [" + s.name + "] give gpus-per-node or gpus-per-task, not both");
  return p;
}

}  // namespace

std::string expand_home(const std::string& path) {
  if (path == "~" || path.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    if (!home || !*home) throw UsageError("cannot expand " + path + ": HOME is not set");
    return std::string(home) + path.substr(1);
  }
  return path;
}

std::string job_root_path(const Profile& p) {
  return std::filesystem::absolute(expand_home(p.job_root)).lexically_normal().string();
}

std::vector<std::string> job_roots(const ProfileSet& set, const std::string& only) {
  std::vector<std::string> roots;
  for (const auto& p : set.profiles) {
    if (!only.empty() && p.name != only) continue;
    std::string root = job_root_path(p);
    if (std::find(roots.begin(), roots.end(), root) == roots.end()) roots.push_back(root);
  }
  if (!only.empty() && roots.empty()) set.select(only);  // the UsageError naming the known profiles
  return roots;
}

std::string profiles_path() {
  if (const char* p = std::getenv("DLSCALE_PROFILES"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/dlscale/profiles.ini";
  return expand_home("~/.config/dlscale/profiles.ini");
}

ProfileSet parse_profiles(const std::string& text, const std::string& path) {
  ProfileSet set;
  set.path = path;
  Profile local;
  local.name = "local";
  local.source = "built-in";
  set.profiles.push_back(local);
  std::vector<Section> sections;
  std::istringstream in(text);
  std::string raw;
  int default_line = 0;
  for (int n = 1; std::getline(in, raw); ++n) {
    std::string line = strip_comment(raw);
    if (line.empty()) continue;
    if (line.front() == '[') {
      static const std::regex name(R"(\[([A-Za-z0-9][A-Za-z0-9._-]*)\])");
      std::smatch m;
      if (!std::regex_match(line, m, name))
        throw UsageError(path + ":" + std::to_string(n) + ": bad section header '" + line +
                         "' (a profile name is letters, digits, '.', '_' and '-')");
      for (const auto& s : sections)
        if (s.name == m[1]) throw UsageError(path + ":" + std::to_string(n) + ": profile [" + s.name + "] is defined twice");
      sections.push_back({m[1], n, {}});
      continue;
    }
    auto eq = line.find('=');
    if (eq == std::string::npos)
      throw UsageError(path + ":" + std::to_string(n) + ": expected 'key = value' or '[profile]', got '" + line + "'");
    Entry e{n, trim(line.substr(0, eq)), trim(line.substr(eq + 1))};
    if (!sections.empty()) {
      sections.back().entries.push_back(e);
    } else if (e.key == "default") {
      set.file_default = e.value;
      default_line = n;
    } else {
      throw UsageError(path + ":" + std::to_string(n) + ": unknown key '" + e.key +
                       "' before the first [profile] (only 'default = NAME' may come first)");
    }
  }
  for (const auto& s : sections) {
    Profile p = build_profile(s, path);
    if (p.name == "local")
      set.profiles[0] = p;
    else
      set.profiles.push_back(p);
  }
  if (!set.file_default.empty() && !set.find(set.file_default))
    throw UsageError(path + ":" + std::to_string(default_line) + ": default = " + set.file_default +
                     ": no such profile in the file");
  return set;
}

ProfileSet load_profiles(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    ProfileSet set = parse_profiles("", path);
    return set;
  }
  std::stringstream text;
  text << file.rdbuf();
  ProfileSet set = parse_profiles(text.str(), path);
  set.file_exists = true;
  return set;
}

const Profile* ProfileSet::find(const std::string& name) const {
  for (const auto& p : profiles)
    if (p.name == name) return &p;
  return nullptr;
}

std::string ProfileSet::default_name(const std::string& requested) const {
  if (!requested.empty()) return requested;
  if (const char* env = std::getenv("DLSCALE_PROFILE"); env && *env) return env;
  if (!file_default.empty()) return file_default;
  return "local";
}

const Profile& ProfileSet::select(const std::string& requested) const {
  std::string name = default_name(requested);
  if (const Profile* p = find(name)) return *p;
  std::string known;
  for (const auto& p : profiles) known += (known.empty() ? "" : ", ") + p.name;
  throw UsageError("unknown profile '" + name + "' (profiles: " + known + "; file " + path +
                   (file_exists ? "" : ", which does not exist") + ")");
}

std::string Profile::node_count() const {
  return min_nodes > 0 && min_nodes < nodes ? std::to_string(min_nodes) + "-" + std::to_string(nodes) : std::to_string(nodes);
}

void set_node_count(Profile& p, const std::string& value, const std::string& where) {
  static const std::regex form(R"(([0-9]{1,6})(?:-([0-9]{1,6}))?)");
  std::smatch m;
  if (std::regex_match(value, m, form)) {
    const int first = std::stoi(m[1].str()), last = m[2].matched ? std::stoi(m[2].str()) : first;
    if (first >= 1 && last >= first) {
      p.nodes = last;
      p.min_nodes = m[2].matched ? first : 0;
      return;
    }
  }
  throw UsageError(where + " = " + value + ": expected a node count N >= 1 or a range MIN-MAX with 1 <= MIN <= MAX");
}

std::string describe(const Profile& p) {
  std::ostringstream d;
  if (!p.is_slurm()) {
    d << "processes on this machine, " << p.tasks_per_node << " rank(s)";
  } else {
    d << p.node_count() << " node(s) x " << p.tasks_per_node << " task(s)";
    if (p.gpus_per_task) d << ", " << p.gpus_per_task << " GPU(s)/task";
    if (p.gpus_per_node) d << ", " << p.gpus_per_node << " GPU(s)/node";
    if (p.cpus_per_task) d << ", " << p.cpus_per_task << " CPU(s)/task";
    if (!p.partition.empty()) d << ", partition " << p.partition;
    if (!p.account.empty()) d << ", account " << p.account;
    if (!p.qos.empty()) d << ", qos " << p.qos;
    if (!p.time.empty()) d << ", time " << p.time;
    if (p.stage_data) d << ", data staged to " << (p.stage_dir.empty() ? "${SLURM_TMPDIR:-/tmp}" : p.stage_dir);
  }
  d << "; jobs in " << p.job_root;
  return d.str();
}

}  // namespace dlscale
