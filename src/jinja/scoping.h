// Jinja's compile-time name resolution, which a plain scope chain misses.
//
// Jinja gives each frame (the template, a loop body, a loop's else, a macro, a
// block set, a filter block, a with block) a symbol table built before the
// template runs. A name whose first mention at a frame's own level is an
// unconditional `{% set %}` (not inside an `if`), and that no enclosing frame
// mentions, is a local of that frame from the frame's start: until the set
// runs it is Undefined, even where the context has a value of that name. So in
//   {% for m in messages %}{{ system }}{% endfor %}{% set system = 'x' %}
// the loop prints nothing although `system` was passed in. A load first, or a
// set inside an if, makes the frame start from the outer value instead.
#pragma once

#include "jinja/parser.h"

namespace tokamak::jinja {

// Fills Program::unbound_in_root and Stmt::unbound_in_body / unbound_in_else.
void mark_unbound_locals(Program& program);

}  // namespace tokamak::jinja
