// Quoting for the scripts dlscale generates. Every value that comes from a
// user (job name, paths, profile fields, train options) goes through one of
// these, so a name like `'; touch /tmp/pwned #` stays a name.
#pragma once

#include <string>
#include <string_view>

namespace dlscale {

// For bash: the value in single quotes, each ' written as '\'' . Nothing
// inside single quotes is special to the shell.
std::string shell_quote(std::string_view value);

// For an `#SBATCH` line, which bash ignores and sbatch parses with its own
// rules (quotes, backslash escapes everywhere, '#' starts a comment): the
// value in double quotes with \ and " escaped.
std::string sbatch_quote(std::string_view value);

// Slurm expands %j, %x, ... in --output paths; %% is a literal %.
std::string slurm_filename(std::string_view path);

// A folder that may start with an environment variable ($TMPDIR/x or
// ${SLURM_TMPDIR}/x) as a shell word: "${VAR}"'/x'. The variable name is
// checked, the rest quoted, so the only expansion is that one variable.
std::string shell_path_expression(std::string_view value, std::string_view what);

// Control characters (a newline above all) would end an #SBATCH line or a
// comment early: refused with a UsageError naming `what`.
void require_printable(std::string_view value, std::string_view what);

// Letters, digits, '.', '_' and '-' only, for folder names: anything else
// becomes '_' (a name with '/' must not make a path).
std::string safe_file_name(std::string_view name);

}  // namespace dlscale
