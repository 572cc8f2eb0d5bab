#!/usr/bin/perl
# The source tree's layers, checked on the built objects: README's "Layout"
# names every src/*.c under a layer, lowest first; a file may reference only
# symbols defined in its own or a lower layer, and no files may reference
# each other in a circle. A reference is any undefined symbol of one object
# that another of lake's objects defines (a call or a variable), as `nm`
# shows it, so a forgotten prototype or a static inline cannot hide one.
# And a header holds a module's public surface only: a function another
# object never references is static, unless PostgreSQL calls it by name (an
# SQL-callable function, a background worker's entry point) or a file given
# after "--" (the fuzz harnesses) does.
#
#   perl test/layers.pl README.md src/*.o -- src/*.c test/fuzz/*.c
use strict;
use warnings;

my ($readme, @objs) = @ARGV;
my @texts;
if (my ($sep) = grep { $objs[$_] eq '--' } 0 .. $#objs)
{
	@texts = @objs[ $sep + 1 .. $#objs ];
	splice @objs, $sep;
}
die "usage: $0 README.md OBJECT... [-- SOURCE...]\n" unless $readme && @objs;

# The layers, from README's Layout block: "# name" starts a layer, each
# "src/file.c" line after it belongs to it.
my (%layer, @names);
open my $fh, '<', $readme or die "$readme: $!\n";
my $in = 0;
while (<$fh>)
{
	if (/^## Layout/) { $in = 1; next; }
	next unless $in;
	last if /^```\s*$/ && @names;
	if (/^# (.+?)\s*$/) { push @names, $1; next; }
	$layer{$1} = $#names if m{^src/(\w+)\.c\s} && @names;
}
close $fh;
die "$readme: no layers found under \"## Layout\"\n" unless @names;

my @fail;
my (%defined_in, %refs, %function);
for my $obj (@objs)
{
	my ($file) = $obj =~ m{(\w+)\.o$} or die "$obj: not an object file\n";
	push @fail, "src/$file.c is in no layer of ${readme}'s Layout"
	  unless exists $layer{$file};
	open my $nm, '-|', 'nm', '-P', $obj or die "nm: $!\n";
	while (<$nm>)
	{
		my ($sym, $type) = split ' ';
		if ($type eq 'U') { $refs{$file}{$sym} = 1; }
		elsif ($type =~ /^[TDBRC]$/) { $defined_in{$sym} = $file; }
		$function{$sym} = $file if $type eq 'T';
	}
	close $nm or die "nm $obj failed\n";
}
my %built = map { (m{(\w+)\.o$})[0] => 1 } @objs;
for my $file (sort keys %layer)
{
	push @fail, "${readme}'s Layout names src/$file.c, which is not built"
	  unless $built{$file};
}

# Exported functions nothing else references.
my %referenced;
for my $file (keys %refs) { $referenced{$_} = 1 for keys %{ $refs{$file} }; }
my $named = '';
for my $text (@texts)
{
	open my $t, '<', $text or die "$text: $!\n";
	local $/;
	my $body = <$t>;
	# A harness names the functions it calls; a source file names a
	# function PostgreSQL calls by name in a string ("lake_worker_main").
	$named .= $text =~ m{(^|/)test/fuzz/} ? $body : join("\n", $body =~ /"(\w+)"/g);
	$named .= "\n";
	close $t;
}
for my $sym (sort keys %function)
{
	next if $referenced{$sym} || $sym =~ /^(pg_finfo_|Pg_magic_func$|_PG_init$)/;
	next if exists $function{"pg_finfo_$sym"};
	next if $named =~ /\b\Q$sym\E\b/;
	push @fail, "src/$function{$sym}.c exports $sym, which no other file uses: make it static";
}

# file -> file it references -> the symbols
my %edge;
for my $file (keys %refs)
{
	for my $sym (keys %{ $refs{$file} })
	{
		my $to = $defined_in{$sym};
		$edge{$file}{$to}{$sym} = 1 if defined $to && $to ne $file;
	}
}

for my $from (sort keys %edge)
{
	for my $to (sort keys %{ $edge{$from} })
	{
		next unless exists $layer{$from} && exists $layer{$to};
		next if $layer{$to} <= $layer{$from};
		push @fail,
		  sprintf("src/%s.c (%s) calls up into src/%s.c (%s): %s",
			$from, $names[ $layer{$from} ], $to, $names[ $layer{$to} ],
			join(', ', sort keys %{ $edge{$from}{$to} }));
	}
}

# Circles: a depth-first search that meets a file still on its path.
my (%state, @path);
my $visit;
$visit = sub {
	my ($file) = @_;
	$state{$file} = 1;
	push @path, $file;
	for my $to (sort keys %{ $edge{$file} // {} })
	{
		if (($state{$to} // 0) == 1)
		{
			my @cycle = (@path[ (grep { $path[$_] eq $to } 0 .. $#path)[0] .. $#path ], $to);
			push @fail, 'files call each other in a circle: '
			  . join(' -> ', map { "src/$_.c" } @cycle);
		}
		$visit->($to) unless $state{$to};
	}
	pop @path;
	$state{$file} = 2;
};
$visit->($_) for sort keys %built;

if (@fail)
{
	print STDERR "layers: $_\n" for @fail;
	exit 1;
}
my $n = 0;
$n += keys %{ $edge{$_} } for keys %edge;
printf "layers: %d files in %d layers, %d references between files, none upward, no circle\n",
  scalar(keys %built), scalar(@names), $n;
