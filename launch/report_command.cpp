// dlscale report RUN|SWEEP [--output FILE]: the run's or sweep's report.html
// (launch/report.h), readable offline.
#include <boost/program_options.hpp>
#include <iostream>

#include "launch/commands.h"
#include "launch/parse_options.h"
#include "launch/report.h"

namespace dlscale {

namespace po = boost::program_options;

int report_command(const Args& args, Communicator& comm) {
  po::options_description desc("usage: dlscale report RUN|SWEEP [--output FILE]");
  desc.add_options()("help,h", "this help")("output", po::value<std::string>(), "the page (default: RUN/report.html)")(
      "path", po::value<std::string>(), "a run directory, a job folder or a sweep's job folder");
  po::positional_options_description positional;
  positional.add("path", 1);
  po::variables_map vm;
  parse_options(args, desc, vm, &positional);
  if (vm.count("help")) {
    if (comm.rank() == 0) std::cout << desc;
    return 0;
  }
  if (comm.size() > 1) throw UsageError("report: run it as one process, not under mpirun or srun");
  if (!vm.count("path")) throw UsageError("report: give a run directory or a sweep folder\nusage: dlscale report RUN|SWEEP [--output FILE]");
  const std::string written =
      write_report(vm["path"].as<std::string>(), vm.count("output") ? vm["output"].as<std::string>() : "");
  std::cout << "report: " << written << "\n";
  return 0;
}

}  // namespace dlscale
