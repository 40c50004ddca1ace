"""Domain ``sport``: a football club and a road cycling team. Questions are marked with *.

* ``football_club`` (12 paragraphs, 9 questions): overview naming the club (town, division, colours, a landmark,
  president*); training centre and medical staff (kit maker); founding (year*, founders, first chairman); stadium
  (name, opening, capacity*, record crowd, training centre); honours (first title, all-time leading scorer*);
  rivalries (fiercest rival, the derby's name*, police); the war years (a play-off crowd); youth academy (most famous
  graduate*); supporters (average crowd, members*, oldest group); finances (turnover, shirt sponsor*); the present
  season (head coach*, captain); women's team, foundation and museum. Entity names are an invented word with an
  all-capitals affix ("FC Velmora", "Velmora AFC"), so no word but the invented one names the club. Later
  paragraphs say "the club".
* ``cycling_team`` (12 paragraphs, 9 questions): overview naming the team (two sponsors' names joined by a dash, as
  professional teams are; budget; general manager*); racing programme (race days, planner); history (founding year*
  and founder, first grand tour, former sponsor); team leader* (a stage race); victories (grand tour stages*); bikes
  (frame builder*, components); service course and winter camp (distance ridden*); staff (head sports director*,
  doctor); jersey and fan club (members*); sponsorship and media; development squad (most successful graduate*); a
  women's team. Later paragraphs say "the team".
"""

from __future__ import annotations

from curation.sources.controlled.template import (
    FEW,
    MANY,
    PERSON,
    PLACE,
    SEVERAL,
    Choice,
    Later,
    Name,
    Number,
    Template,
    Year,
)

COLOURS = Choice(("red", "blue", "green", "black", "white", "yellow", "claret", "orange", "sky-blue", "maroon"))

FOOTBALL_CLUB = Template(
    name="football_club",
    domain="sport",
    noun="football club",
    entity=Name(("FC {W}", "{W} FC", "SK {W}", "AFC {W}", "SC {W}", "FK {W}")),
    paragraphs=(
        "{entity} is a professional football club based in {club_town}, a {town_kind} in the {club_region}, that "
        "plays in the {club_division} division of the national league. The team wears {colour_a} and {colour_b} "
        "shirts and has played its home matches at the same ground, close to the {landmark}, for most of its "
        "history. The club is owned by its members, and its president since the last election has been {president}.",
        "The first team trains at the training centre on {pitches} pitches, one of them covered by a heated hall "
        "for the winter. A medical department of {medical_staff} and physiotherapists, led by {club_doctor}, looks "
        "after the players, and a sports science unit measures every sprint with cameras above the pitches. The kit "
        "is made by {kit_maker}, a local firm that has supplied the shirts since the early years.",
        "The club was founded in {club_founded} by a group of {founders} who played on a meadow behind the "
        "{founding_place}. Its first chairman was {first_chairman}, and its first recorded match, against a team of "
        "soldiers, ended in a defeat by {first_defeat}. It turned professional when the national league was created "
        "and has since spent {top_seasons} in the top division, more than any other club from its region.",
        "The club's stadium, {stadium}, opened in {stadium_year} and holds {capacity} spectators. Its record "
        "attendance, {record_crowd}, was set in a cup tie against the champions, when fans stood on the roofs of "
        "the neighbouring houses. The stands were rebuilt with seats at a cost of {rebuild_cost}, and the training "
        "centre, {training_centre}, lies in the woods a short drive outside town.",
        "The club has won the national championship {league_titles} times and the cup {cups} times; its first title "
        "came in {first_title}, after a last-day victory away at {title_opponent}. Its greatest night in Europe was "
        "a quarter-final against a famous foreign side, won on penalties in front of a full house. The all-time "
        "leading scorer is the striker {top_scorer}, with {scorer_goals} in all competitions.",
        "The fiercest rival is {rival}, from the other side of the valley; the derby between the two is known as "
        "the {derby} and has been played {derby_games} since the first meeting. A second rivalry, with a club from "
        "the regional capital, dates from a cup final in which three players were sent off. Police deploy about "
        "{police} for each derby, and away fans travel in special trains.",
        "The darkest years came during the war, when the ground was used as a supply depot and {war_players} were "
        "called up. Football resumed in a league of regional clubs, and the return to the top division only came "
        "after a promotion play-off watched by {playoff_crowd} people, still remembered in town as the day the "
        "factories stopped work early.",
        "The youth academy, founded in {academy_year}, trains about {academy_players} and girls in {academy_teams} "
        "teams, from the age of six upwards. Its most famous graduate is the midfielder {graduate}, who was sold "
        "abroad for a record fee of {transfer_fee} and later captained the national team. The academy has its own "
        "boarding house and a partnership with a secondary school in town.",
        "Home matches draw an average crowd of {average_crowd}, and the club has about {members} members, who elect "
        "the president and the board. The oldest supporters' group, the {supporters_group}, was formed in "
        "{group_year} and leads the singing behind the northern goal. Before every match the crowd sings the club "
        "anthem, written by a local schoolteacher, whose chorus names the streets of the old town.",
        "The club's annual turnover is about {turnover}, of which broadcasting money makes up roughly half. The "
        "main shirt sponsor is {sponsor}, which signed a new contract worth {sponsor_deal} a year. Any profit is "
        "spent on the academy and the upkeep of the ground, and the accounts, published every autumn, have shown a "
        "small surplus in {surplus_years} of the last ten seasons.",
        "The head coach is {coach}, a former defender who took over after a run of {bad_run} defeats and steered "
        "the team away from relegation. Last season the team finished {finish} in the league in front of a total of "
        "{season_crowd} spectators, and reached the last sixteen of the cup. The squad numbers {squad} players, and "
        "the captain, the goalkeeper {captain}, has played for no other club.",
        "A women's team was added in {womens_year} and now plays in the top flight, sharing the training centre "
        "with the men. The club's foundation runs football lessons in {schools} and a walking football group for "
        "older fans, and its museum, opened beneath the main stand, displays about {museum_objects}, trophies and "
        "photographs from the club's history.",
    ),
    slots={
        "club_town": PLACE,
        "town_kind": Choice(("mining town", "port town", "market town", "university town", "railway town")),
        "club_region": Choice(("northern hills", "eastern lowlands", "western coast", "southern plain")),
        "club_division": Choice(("top", "second", "third")),
        "colour_a": COLOURS,
        "colour_b": Choice(("white", "gold", "black", "navy")),
        "president": PERSON,
        "landmark": Name(("{W} Bridge", "{W} Gate", "{W} Tower")),
        "title_opponent": Name(("{W} Town", "{W} Athletic", "{W} City")),
        "captain": PERSON,
        "pitches": SEVERAL,
        "medical_staff": Number(12, 140, unit=" doctors"),
        "club_doctor": PERSON,
        "kit_maker": Name(("{W} Sportswear", "{W} Textiles")),
        "club_founded": Year(1840, 1959),
        "founders": Choice(("railway workers", "students", "miners", "dockers", "teachers", "factory clerks")),
        "founding_place": Choice(("gasworks", "brewery", "railway yards", "grammar school", "cotton mill")),
        "first_chairman": PERSON,
        "first_defeat": Choice(("four goals to one", "three goals to nil", "five goals to two", "two goals to one")),
        "top_seasons": Number(12, 160, unit=" seasons"),
        "stadium": Name(("{W} Park", "{W} Road", "{W} Arena", "Stadion {W}")),
        "stadium_year": Later("club_founded", 2, 40),
        "capacity": Number(6_000, 78_000, step=250),
        "record_crowd": Number(9_000, 99_000, step=13),
        "rebuild_cost": Number(40, 990, decimals=1, unit=" million euros"),
        "training_centre": Name(("{W} Training Ground", "{W} Sports Park")),
        "league_titles": SEVERAL,
        "cups": FEW,
        "first_title": Later("club_founded", 10, 60),
        "top_scorer": PERSON,
        "scorer_goals": Number(120, 490, unit=" goals"),
        "rival": Name(("{W} Athletic", "{W} United", "Real {W}", "{W} Wanderers")),
        "derby": Name(("{W} Derby", "Derby of the {W}")),
        "derby_games": Number(90, 390, unit=" times"),
        "police": Number(300, 2_900, step=10, unit=" officers"),
        "war_players": Number(14, 160, unit=" players"),
        "playoff_crowd": Number(11_000, 89_000, step=10),
        "academy_year": Year(1900, 2019),
        "academy_players": Number(90, 480, unit=" boys"),
        "academy_teams": MANY,
        "graduate": PERSON,
        "transfer_fee": Number(15, 990, decimals=1, unit=" million euros"),
        "average_crowd": Number(4_000, 61_000, step=50),
        "members": Number(2_000, 140_000, step=100),
        "supporters_group": Name(("{W} Boys", "Brigade {W}", "{W} Ultras")),
        "group_year": Year(1890, 2019),
        "turnover": Number(80, 2_900, decimals=1, unit=" million euros"),
        "sponsor": Name(("{W} Bank", "{W} Brewery", "{W} Insurance", "{W} Motors")),
        "sponsor_deal": Number(5, 990, decimals=1, unit=" million euros"),
        "surplus_years": Choice(("six", "seven", "eight", "nine")),
        "coach": PERSON,
        "bad_run": SEVERAL,
        "finish": Choice(("third", "fifth", "sixth", "seventh", "ninth", "eleventh", "fourteenth")),
        "season_crowd": Number(60_000, 990_000, step=500),
        "squad": Choice(("twenty-four", "twenty-six", "twenty-eight", "thirty")),
        "womens_year": Year(1970, 2019, unique=False),
        "schools": Number(20, 290, unit=" schools"),
        "museum_objects": Number(300, 9_000, step=10, unit=" shirts"),
    },
    questions={
        "president": "Who is the president of {entity}?",
        "club_founded": "In which year was {entity} founded?",
        "capacity": "How many spectators does the stadium of {entity} hold?",
        "top_scorer": "Who is the all-time leading scorer of {entity}?",
        "derby": "What is the derby between {entity} and its fiercest rival called?",
        "graduate": "Who is the most famous graduate of the youth academy of {entity}?",
        "members": "How many members does {entity} have?",
        "sponsor": "Who is the main shirt sponsor of {entity}?",
        "coach": "Who is the head coach of {entity}?",
    },
)

CYCLING_TEAM = Template(
    name="cycling_team",
    domain="sport",
    noun="cycling team",
    entity=Name(("{W}–{W}",)),
    paragraphs=(
        "{entity} is a professional road cycling team registered in {team_town}, named after its two main sponsors, "
        "{sponsor_a} and {sponsor_b}. The team races in the top tier of the sport and has a budget of about "
        "{team_budget} a season. Its general manager, {manager}, built it up from a regional amateur squad and "
        "still follows every major race from the second team car, radio in hand.",
        "Each season the team rides about {race_days} of racing on five continents, from the desert stages in late "
        "winter to the autumn classics. The calendar is planned by {planner}, who books the hotels for the whole "
        "year in advance and sends the riders their schedules before the first training camp. On the road the team "
        "travels with {trucks} trucks, two buses and a mobile kitchen.",
        "The team was founded in {team_founded} by the former rider {team_founder} as an amateur club for young "
        "riders from the hills around its home town. It turned professional in {pro_year} and rode its first grand "
        "tour in {first_tour}, when none of its riders finished in the top fifty. The present sponsors joined in "
        "{sponsors_year}, replacing {old_sponsor}, a chain of hardware stores that had backed the team for a "
        "decade.",
        "The team leader is the climber {leader}, who joined from a rival squad in a transfer that made headlines "
        "across the sport, for a salary reported at {leader_salary} a year. Last summer the leader won the "
        "mountains classification of the {stage_race}, finishing {gc_place} overall. The roster counts {roster} "
        "riders from {nations} nations, most of them domestiques who fetch bottles and set the pace on the flat.",
        "Over its history the team has won {stage_wins} of the three grand tours and {classics} one-day classics. "
        "Its most celebrated victory came on a wet afternoon on the northern cobbles, when a young rider attacked "
        "{attack_km} from the finish and held off the favourites. The team counts {pro_wins} in all, a record among "
        "teams from its country.",
        "The riders use frames built by {bike_maker}, a family firm that has supplied the team since its amateur "
        "days, with wheels and components from {components}. Each rider has {bikes_each} bikes for a season, and "
        "the mechanics travel with a truck that carries about {spare_wheels}. The frames are tested in a wind "
        "tunnel at the maker's factory in {factory_town}.",
        "The service course, the team's headquarters and workshop, stands on an industrial estate at "
        "{service_course}, with a gym and a garage for the {team_cars} team cars. Each winter the riders gather for "
        "a training camp on a southern island, riding about {camp_km} in two weeks. The coaches plan every rider's "
        "season from power data sent after each ride, and a nutritionist weighs every meal.",
        "Behind the riders stand {staff_count}: directors, coaches, doctors, soigneurs, chefs and bus drivers. The "
        "head sports director, {director}, rode for the team as an amateur and now directs the race tactics over "
        "the radio. The team doctor, {doctor}, leads the medical staff and has made the squad's anti-doping "
        "programme one of the strictest in the sport.",
        "The team's jersey is {jersey_a} with {jersey_b} sleeves, a design by {jersey_designer} that has barely "
        "changed since the present sponsors arrived. Its fan club has about {fan_members}, who paint the names of "
        "the riders on the mountain roads each summer. The team bus, a converted coach with {bus_seats} reclining "
        "seats, is a familiar sight in the start villages.",
        "The sponsors' contract runs for another {contract_years} seasons and is worth about {sponsor_value} a year "
        "in all. A documentary series filmed inside the team during the biggest stage race was watched by {viewers} "
        "viewers, and the press officer, {press_officer}, answers questions from journalists in four languages "
        "every evening of a race.",
        "The team also runs a development squad for riders under twenty-three, based at {dev_base}, which has sent "
        "{dev_graduates} into the professional ranks. Its most successful graduate, {dev_star}, won the national "
        "championship at the age of twenty and now rides for a rival squad. Talent scouts watch {junior_races} a "
        "year in {scouted} countries.",
        "A women's team was launched under the same name in {womens_team_year} and now races a full calendar of "
        "one-day and stage races. Its captain, {womens_captain}, won the national time trial title twice, and the "
        "squad of {womens_riders} riders shares the service course, the buses and the mechanics with the men.",
    ),
    slots={
        "team_town": PLACE,
        "sponsor_a": Choice(
            ("a bank", "a supermarket chain", "a national lottery", "a bicycle maker", "a telecoms firm")
        ),
        "sponsor_b": Choice(
            ("an insurer", "a software firm", "a kitchen maker", "an energy company", "a dairy cooperative")
        ),
        "team_budget": Number(40, 690, decimals=1, unit=" million euros"),
        "manager": PERSON,
        "team_founder": PERSON,
        "old_sponsor": Name(("{W} Hardware", "{W} Stores")),
        "stage_race": Name(("Tour of {W}", "{W} Tour")),
        "jersey_designer": PERSON,
        "junior_races": Number(40, 390, unit=" junior races"),
        "race_days": Number(180, 390, unit=" days"),
        "planner": PERSON,
        "trucks": FEW,
        "team_founded": Year(1860, 1979),
        "pro_year": Later("team_founded", 3, 20),
        "first_tour": Later("pro_year", 1, 10),
        "sponsors_year": Later("first_tour", 2, 12),
        "leader": PERSON,
        "leader_salary": Number(50, 990, decimals=2, unit=" million euros"),
        "gc_place": Choice(("fourth", "sixth", "seventh", "ninth", "twelfth")),
        "roster": Choice(("twenty-six", "twenty-eight", "twenty-nine", "thirty")),
        "nations": SEVERAL,
        "stage_wins": Number(12, 190, unit=" stages"),
        "classics": SEVERAL,
        "attack_km": Number(50, 450, decimals=1, unit=" kilometres"),
        "pro_wins": Number(210, 990, unit=" professional victories"),
        "bike_maker": Name(("{W} Cycles", "{W} Bikes", "Officine {W}")),
        "components": Name(("{W} Components", "{W} Parts")),
        "bikes_each": FEW,
        "spare_wheels": Number(120, 690, unit=" spare wheels"),
        "factory_town": PLACE,
        "service_course": PLACE,
        "team_cars": SEVERAL,
        "camp_km": Number(1_200, 2_900, step=5, unit=" kilometres"),
        "staff_count": Number(41, 190, unit=" staff"),
        "director": PERSON,
        "doctor": PERSON,
        "jersey_a": COLOURS,
        "jersey_b": Choice(("white", "black", "grey", "navy")),
        "fan_members": Number(800, 39_000, step=50, unit=" members"),
        "bus_seats": MANY,
        "contract_years": FEW,
        "sponsor_value": Number(21, 490, decimals=1, unit=" million euros"),
        "viewers": Number(1_200_000, 9_900_000, step=10_000),
        "press_officer": PERSON,
        "dev_base": PLACE,
        "dev_graduates": Number(14, 190, unit=" riders"),
        "dev_star": PERSON,
        "scouted": SEVERAL,
        "womens_team_year": Later("sponsors_year", 1, 10),
        "womens_captain": PERSON,
        "womens_riders": MANY,
    },
    questions={
        "manager": "Who is the general manager of {entity}?",
        "team_founded": "In which year was {entity} founded?",
        "leader": "Who is the team leader of {entity}?",
        "stage_wins": "How many grand tour stages has {entity} won?",
        "bike_maker": "Which company builds the frames of {entity}?",
        "camp_km": "How far do the riders of {entity} ride at their winter training camp?",
        "director": "Who is the head sports director of {entity}?",
        "fan_members": "How many members does the fan club of {entity} have?",
        "dev_star": "Who is the most successful graduate of the development squad of {entity}?",
    },
)

TEMPLATES = (FOOTBALL_CLUB, CYCLING_TEAM)
