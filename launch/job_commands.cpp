// dlscale jobs, fetch and cancel: what became of submitted jobs. A JOB is a
// job folder name, a Slurm job id, or a job folder's path.
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "launch/commands.h"
#include "launch/parse_options.h"
#include "slurm/profiles.h"
#include "runtime/monitoring/text_table.h"
#include "slurm/jobs.h"

namespace dlscale {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

struct Parsed {
  po::variables_map vm;
  std::vector<std::string> jobs;
  bool help = false;
};

Parsed parse(const Args& args, po::options_description& desc) {
  desc.add_options()("help,h", "this text")("profile", po::value<std::string>(), "only this profile's job root")(
      "job", po::value<std::vector<std::string>>(), "job folder name or Slurm job id");
  po::positional_options_description positional;
  positional.add("job", -1);
  Parsed p;
  parse_options(args, desc, p.vm, &positional);
  p.help = p.vm.count("help") > 0;
  if (p.vm.count("job")) p.jobs = p.vm["job"].as<std::vector<std::string>>();
  return p;
}

std::vector<std::string> roots(const Parsed& p) {
  ProfileSet set = load_profiles(profiles_path());
  return job_roots(set, p.vm.count("profile") ? p.vm["profile"].as<std::string>() : "");
}

SlurmView slurm_view_for(const std::vector<JobRecord>& jobs) {
  for (const auto& j : jobs)
    if (j.type == "slurm") return query_slurm();
  return {};
}

std::string job_id(const JobRecord& j) {
  if (j.type == "slurm") return j.slurm_id.empty() ? "-" : j.slurm_id;
  return j.pid ? "pid " + std::to_string(j.pid) : "-";
}

// For sentences: "Slurm job 12" or "local pid 345".
std::string job_label(const JobRecord& j) {
  if (j.type == "slurm") return j.slurm_id.empty() ? "not submitted" : "Slurm job " + j.slurm_id;
  return j.pid ? "local pid " + std::to_string(j.pid) : "not started";
}

std::string number(double v, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

nlohmann::json status_json(const JobRecord& j, const JobStatus& s) {
  nlohmann::json r = {{"job", j.folder},  {"name", j.name},       {"id", job_id(j)},  {"profile", j.profile},
                      {"dir", j.dir},     {"state", state_name(s.state)}, {"detail", s.detail}, {"submitted", j.submitted}};
  r["node_failures"] = nlohmann::json::array();
  for (const auto& f : s.node_failures) r["node_failures"].push_back({{"node", f.node}, {"ranks", f.ranks}});
  r["lost_ranks"] = s.lost_ranks;
  if (s.progress.known)
    r["progress"] = {{"epoch", s.progress.epoch}, {"max_epochs", s.progress.max_epochs},
                     {"iteration", s.progress.iteration}, {"loss", s.progress.loss}};
  return r;
}

void print_table(const std::vector<JobRecord>& jobs, const std::vector<JobStatus>& statuses) {
  std::vector<std::vector<std::string>> rows = {{"JOB", "ID", "PROFILE", "STATE", "EPOCH", "ITERATION", "LOSS", ""}};
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Progress& p = statuses[i].progress;
    std::string epoch = p.known ? std::to_string(p.epoch) + (p.max_epochs ? "/" + std::to_string(p.max_epochs) : "") : "-";
    rows.push_back({jobs[i].folder, job_id(jobs[i]), jobs[i].profile, state_name(statuses[i].state), epoch,
                    p.known ? std::to_string(p.iteration) : "-", p.known ? number(p.loss, 4) : "-", statuses[i].detail});
  }
  std::cout << align_columns(rows);
}

std::string tail(const fs::path& file, int lines) {
  std::ifstream in(file);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (std::size_t i = all.size() > static_cast<std::size_t>(lines) ? all.size() - lines : 0; i < all.size(); ++i)
    out += "  " + all[i] + "\n";
  return out;
}

void print_summary(const fs::path& run) {
  std::ifstream in(run / "summary.json");
  nlohmann::json s = nlohmann::json::parse(in);
  std::ostringstream line;
  const std::pair<const char*, const char*> figures[] = {{"test_accuracy", "test accuracy"},
                                                         {"test_loss", "test loss"},
                                                         {"validation_accuracy", "validation accuracy"},
                                                         {"epochs", "epochs"},
                                                         {"iterations", "iterations"},
                                                         {"world_size", "world size"},
                                                         {"wall_time_s", "wall time (s)"}};
  for (const auto& [key, label] : figures)
    if (s.contains(key) && s[key].is_number())
      line << (line.tellp() > 0 ? ", " : "") << label << " "
           << (s[key].is_number_integer() ? std::to_string(s[key].get<long long>()) : number(s[key].get<double>(), 4));
  std::cout << line.str() << "\n" << (run / "summary.json").string() << ":\n" << s.dump(2) << "\n";
}

// A job array: each task's state, test accuracy and run directory.
int fetch_array(const JobRecord& job, const SlurmView& slurm) {
  bool all_done = true;
  for (int i = 0; i < job.array_size; ++i) {
    const fs::path run = fs::path(task_dir(job, i)) / "run";
    JobStatus t = task_status(job, i, slurm);
    std::cout << "task " << i << ": " << state_name(t.state);
    if (t.state == JobState::done && fs::exists(run / "summary.json")) {
      std::ifstream in(run / "summary.json");
      auto s = nlohmann::json::parse(in);
      if (s.contains("test_accuracy") && s["test_accuracy"].is_number())
        std::cout << ", test accuracy " << number(s["test_accuracy"].get<double>(), 4);
    } else {
      all_done = false;
    }
    std::cout << ", " << run.string() << "\n";
  }
  return all_done ? 0 : 1;
}

}  // namespace

int jobs_command(const Args& args, Communicator& comm) {
  po::options_description desc("usage: dlscale jobs [JOB ...] [--profile P] [--json]");
  desc.add_options()("json", "one JSON object per job instead of the table");
  Parsed p = parse(args, desc);
  if (p.help || comm.rank() != 0) {
    if (p.help && comm.rank() == 0) std::cout << desc;
    return 0;
  }
  auto rs = roots(p);
  std::vector<JobRecord> jobs;
  if (p.jobs.empty()) {
    // Profiles may share a job root: --profile shows that profile's jobs only.
    for (auto& j : list_jobs(rs))
      if (!p.vm.count("profile") || j.profile == p.vm["profile"].as<std::string>()) jobs.push_back(j);
  } else {
    for (const auto& key : p.jobs) jobs.push_back(find_job(rs, key));
  }
  SlurmView slurm = slurm_view_for(jobs);
  if (!slurm.reachable && !slurm.error.empty())
    std::cerr << "dlscale: warning: cannot ask Slurm (" << slurm.error << "): states come from the job folders\n";
  std::vector<JobStatus> statuses;
  for (const auto& j : jobs) statuses.push_back(job_status(j, slurm));
  if (p.vm.count("json")) {
    for (std::size_t i = 0; i < jobs.size(); ++i) std::cout << status_json(jobs[i], statuses[i]).dump() << "\n";
  } else if (jobs.empty()) {
    std::cout << "no jobs in " << (rs.empty() ? std::string("(no job roots)") : rs[0]) << (rs.size() > 1 ? " and others" : "")
              << "\n";
  } else {
    print_table(jobs, statuses);
  }
  return 0;
}

int fetch_command(const Args& args, Communicator& comm) {
  po::options_description desc("usage: dlscale fetch JOB [--to DIR]");
  desc.add_options()("to", po::value<std::string>(), "copy the run directory there");
  Parsed p = parse(args, desc);
  if (p.help || comm.rank() != 0) {
    if (p.help && comm.rank() == 0) std::cout << desc;
    return 0;
  }
  if (p.jobs.size() != 1) throw UsageError("fetch: give one job (a job folder name or Slurm job id)");
  JobRecord job = find_job(roots(p), p.jobs[0]);
  const SlurmView slurm = job.type == "slurm" ? query_slurm() : SlurmView{};
  JobStatus st = job_status(job, slurm);
  std::cout << "job " << job.folder << " (" << job_label(job) << ", profile " << job.profile << "): " << state_name(st.state)
            << (st.detail.empty() ? "" : " (" + st.detail + ")") << "\n";
  for (const auto& line : st.lost_ranks) std::cout << "lost ranks: " << line << "\n";
  if (job.array_size > 0) return fetch_array(job, slurm);
  const fs::path run = fs::path(job.dir) / "run", log = fs::path(job.dir) / "log.txt";
  if (st.state == JobState::queued || st.state == JobState::running)
    fail("job " + job.folder + " is " + state_name(st.state) + "; fetch it when it is done (dlscale jobs shows its progress)");
  if (st.state != JobState::done || !fs::exists(run / "summary.json")) {
    std::cout << "no results" << (fs::exists(run) ? " (partial outputs in " + run.string() + ")" : "") << "; the end of "
              << log.string() << ":\n"
              << tail(log, 20);
    return 1;
  }
  print_summary(run);
  std::cout << "outputs: " << run.string() << " (model.h5, metrics.jsonl, checkpoints/, log.txt)\n"
            << "job log: " << log.string() << "\n";
  if (p.vm.count("to")) {
    fs::path to = p.vm["to"].as<std::string>();
    if (fs::exists(to)) to /= job.folder;
    fs::create_directories(to.parent_path().empty() ? fs::path(".") : to.parent_path());
    fs::copy(run, to, fs::copy_options::recursive);
    std::cout << "copied " << run.string() << " to " << fs::absolute(to).string() << "\n";
  }
  return 0;
}

int cancel_command(const Args& args, Communicator& comm) {
  po::options_description desc("usage: dlscale cancel JOB");
  Parsed p = parse(args, desc);
  if (p.help || comm.rank() != 0) {
    if (p.help && comm.rank() == 0) std::cout << desc;
    return 0;
  }
  if (p.jobs.empty()) throw UsageError("cancel: give the job (a job folder name or Slurm job id)");
  for (const auto& key : p.jobs) {
    JobRecord job = find_job(roots(p), key);
    if (cancel_job(job))
      std::cout << "cancelled " << job.folder << " (" << job_label(job) << ")\n";
    else
      std::cout << "job " << job.folder << " has finished already: nothing to cancel\n";
  }
  return 0;
}

}  // namespace dlscale
